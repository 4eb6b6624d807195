// A scope that runs the codecs in the default floating-point environment, so
// that their bits never depend on the caller's MXCSR (quant.h, int_quant.h
// say why). Internal to core/.
#pragma once

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace ferry {

// Sets the SSE control register to its default for the lifetime of a codec
// call: round to nearest even, no flush-to-zero / denormals-are-zero, all
// exceptions masked (quant.h says why). The work itself runs in functions the
// compiler cannot move across _mm_setcsr (calls through the kernel table, or
// [[gnu::noinline]] drivers).
// Thread-safety: MXCSR is per thread; the guard touches only the calling one.
class DefaultFloatEnvironment {
 public:
#if defined(__SSE__)
  DefaultFloatEnvironment() : saved_(_mm_getcsr()) {
    constexpr unsigned kControlBits = 0xffc0;  // everything but the sticky status flags
    constexpr unsigned kDefault = 0x1f80;      // exceptions masked, nearest, FTZ and DAZ off
    changed_ = (saved_ & kControlBits) != kDefault;
    if (changed_) _mm_setcsr(kDefault | (saved_ & ~kControlBits));
  }
  ~DefaultFloatEnvironment() {
    if (changed_) _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
  bool changed_;
#endif
 public:
  DefaultFloatEnvironment(const DefaultFloatEnvironment&) = delete;
  DefaultFloatEnvironment& operator=(const DefaultFloatEnvironment&) = delete;
};

}  // namespace ferry
