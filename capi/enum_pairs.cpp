// The C API converts its enums to the C++ ones (and ferry_result back from
// Errc) with a plain cast, so each pair must agree number for number. Both
// sides are append-only; a value added to one side, or renumbered, stops the
// build here instead of silently meaning something else across the boundary.
// Nothing here emits code.
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "ferry/ferry.h"
#include "wire/messages.h"

namespace {

template <class C, class Cpp>
constexpr bool same(C c, Cpp cpp) {
  return static_cast<long long>(c) == static_cast<long long>(cpp);
}

using ferry::DType;
using ferry::Errc;
using ferry::Quant;
using ferry::ReduceOp;
using ferry::wire::SyncStrategy;

static_assert(same(FERRY_OK, Errc::ok));
static_assert(same(FERRY_ERR_INVALID_ARGUMENT, Errc::invalid_argument));
static_assert(same(FERRY_ERR_INVALID_USAGE, Errc::invalid_usage));
static_assert(same(FERRY_ERR_TIMEOUT, Errc::timeout));
static_assert(same(FERRY_ERR_PEER_LOST, Errc::peer_lost));
static_assert(same(FERRY_ERR_MASTER_LOST, Errc::master_lost));
static_assert(same(FERRY_ERR_CONNECT, Errc::connect));
static_assert(same(FERRY_ERR_MISMATCH, Errc::mismatch));
static_assert(same(FERRY_ERR_KICKED, Errc::kicked));
static_assert(same(FERRY_ERR_PROTOCOL, Errc::protocol));
static_assert(same(FERRY_ERR_AUTH, Errc::auth));
static_assert(same(FERRY_ERR_SYSTEM, Errc::system));
static_assert(same(FERRY_ERR_INTERNAL, Errc::internal));
static_assert(same(FERRY_ERR_INTERNAL, ferry::kErrcMax), "a new Errc needs its ferry_result (and a line above)");
static_assert(ferry::is_retryable(Errc::timeout) && ferry::is_retryable(Errc::peer_lost) &&
                  !ferry::is_retryable(Errc::invalid_argument) && !ferry::is_retryable(Errc::invalid_usage),
              "ferry.h promises: timeouts and lost peers are retryable, misuse is not");

static_assert(same(FERRY_U8, DType::u8));
static_assert(same(FERRY_I8, DType::i8));
static_assert(same(FERRY_U16, DType::u16));
static_assert(same(FERRY_I16, DType::i16));
static_assert(same(FERRY_U32, DType::u32));
static_assert(same(FERRY_I32, DType::i32));
static_assert(same(FERRY_U64, DType::u64));
static_assert(same(FERRY_I64, DType::i64));
static_assert(same(FERRY_F16, DType::f16));
static_assert(same(FERRY_BF16, DType::bf16));
static_assert(same(FERRY_F32, DType::f32));
static_assert(same(FERRY_F64, DType::f64));
static_assert(same(FERRY_F64 + 1, ferry::kDTypeCount), "a new DType needs its ferry_dtype (and a line above)");

static_assert(same(FERRY_OP_SUM, ReduceOp::sum));
static_assert(same(FERRY_OP_AVG, ReduceOp::avg));
static_assert(same(FERRY_OP_PROD, ReduceOp::prod));
static_assert(same(FERRY_OP_MIN, ReduceOp::min));
static_assert(same(FERRY_OP_MAX, ReduceOp::max));
static_assert(same(FERRY_OP_MAX + 1, ferry::kReduceOpCount), "a new ReduceOp needs its ferry_reduce_op");

static_assert(same(FERRY_QUANT_NONE, Quant::none));
static_assert(same(FERRY_QUANT_U8, Quant::u8));
static_assert(same(FERRY_QUANT_I8, Quant::i8));
static_assert(same(FERRY_QUANT_F16, Quant::f16));
static_assert(same(FERRY_QUANT_BF16, Quant::bf16));
static_assert(same(FERRY_QUANT_U4, Quant::u4));
static_assert(same(FERRY_QUANT_I8H, Quant::i8h));
static_assert(same(FERRY_QUANT_I4H, Quant::i4h));
static_assert(same(FERRY_QUANT_I8H_SR, Quant::i8h_sr));
static_assert(same(FERRY_QUANT_I4H_SR, Quant::i4h_sr));
static_assert(same(FERRY_QUANT_I4H_SR + 1, ferry::kQuantCount), "a new Quant needs its ferry_quant");

static_assert(same(FERRY_SYNC_ENFORCE_POPULAR, SyncStrategy::enforce_popular));
static_assert(same(FERRY_SYNC_RECEIVE_ONLY, SyncStrategy::receive_only));
static_assert(same(FERRY_SYNC_SEND_ONLY, SyncStrategy::send_only));

}  // namespace
