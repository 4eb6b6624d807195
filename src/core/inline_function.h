// A move-only std::function with its callable stored inline: handlers on the
// data path (one per chunk read and written) must not allocate. A callable
// too large for the buffer is a compile-time error, not a silent heap
// allocation.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace ferry {

template <class Signature, size_t Capacity = 64>
class InlineFunction;

template <class R, class... Args, size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
 public:
  InlineFunction() = default;

  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, InlineFunction>>>
  InlineFunction(F&& f) {  // NOLINT: implicit, like std::function
    using Fn = std::decay_t<F>;
    static_assert(sizeof(Fn) <= Capacity, "callable too large for InlineFunction: capture less");
    static_assert(alignof(Fn) <= alignof(std::max_align_t));
    static_assert(std::is_nothrow_move_constructible_v<Fn>);
    new (storage_) Fn(std::forward<F>(f));
    ops_ = &table<Fn>;
  }

  InlineFunction(InlineFunction&& other) noexcept { take(std::move(other)); }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(std::move(other));
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) { return ops_->call(storage_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*move)(void* from, void* to);
    void (*destroy)(void*);
  };
  template <class Fn>
  static constexpr Ops table = {
      [](void* p, Args&&... a) -> R { return (*static_cast<Fn*>(p))(std::forward<Args>(a)...); },
      [](void* from, void* to) {
        new (to) Fn(std::move(*static_cast<Fn*>(from)));
        static_cast<Fn*>(from)->~Fn();
      },
      [](void* p) { static_cast<Fn*>(p)->~Fn(); },
  };

  void take(InlineFunction&& other) {
    if (!other.ops_) return;
    other.ops_->move(other.storage_, storage_);
    ops_ = std::exchange(other.ops_, nullptr);
  }
  void reset() {
    if (ops_) ops_->destroy(storage_);
    ops_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace ferry
