// Device tensors through the C API where no CUDA device can be reached: this
// machine's builds (CUDA compiled in with no device, or FERRY_CUDA=OFF) refuse
// them with FERRY_ERR_INVALID_ARGUMENT, say why, and touch nothing; callers
// built before the device fields existed keep host buffers.
// The device runs themselves are tests/cuda's (ferry_cuda_tests).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

using namespace ferry::test;

namespace {

// The refusal names one of the two reasons a device buffer cannot be used here
// (or, on a machine with a GPU, that a host buffer is not device memory).
bool says_why_device_refused(const std::string& error) {
  return error.find("this libferry was built without CUDA") != std::string::npos ||
         error.find("no CUDA device: ") != std::string::npos || error.find("is not device memory") != std::string::npos;
}

}  // namespace

TEST_CASE("api: device buffers are refused cleanly without CUDA or a CUDA device", "[api][device]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  grow_group(comm, 1);
  std::vector<float> send(100, 1.5f), recv(100, -2.0f);
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  CHECK(desc.device == FERRY_DEVICE_CPU);
  CHECK(desc.device_index == 0);
  CHECK(desc.cuda_stream == nullptr);
  desc.device = FERRY_DEVICE_CUDA;

  CHECK(ferry_allreduce(comm, send.data(), recv.data(), send.size(), &desc, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  std::string error = ferry_last_error();
  INFO(error);
  CHECK(says_why_device_refused(error));
  CHECK(error.find("desc->device") != std::string::npos);

  ferry_op* op = nullptr;
  CHECK(ferry_allreduce_async(comm, send.data(), recv.data(), send.size(), &desc, &op) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(op == nullptr);
  CHECK(says_why_device_refused(ferry_last_error()));

  ferry_allreduce_job job;
  ferry_allreduce_job_init(&job);
  job.send = send.data();
  job.recv = recv.data();
  job.count = send.size();
  job.desc.device = FERRY_DEVICE_CUDA;
  CHECK(ferry_allreduce_multiple_with_retry(comm, &job, 1, 0, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("host buffers only"));

  ferry_tensor t;
  ferry_tensor_init(&t);
  CHECK(t.device_index == 0);
  t.name = "w";
  t.data = recv.data();
  t.count = recv.size();
  t.device = FERRY_DEVICE_CUDA;
  ferry_shared_state s;
  ferry_shared_state_init(&s);
  CHECK(s.cuda_stream == nullptr);
  s.tensors = &t;
  s.count = 1;
  s.revision = 3;
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  error = ferry_last_error();
  CHECK(says_why_device_refused(error));
  CHECK_THAT(error, Catch::Contains("state->tensors[0].device ('w')"));
  const int bad_device = 7;  // what a C caller can put in the enum's slot
  std::memcpy(&t.device, &bad_device, sizeof bad_device);
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("7 is not a ferry_device"));

  // Nothing was read into the group or written back: the buffers and the revision are as they were.
  CHECK(recv == std::vector<float>(100, -2.0f));
  CHECK(send == std::vector<float>(100, 1.5f));
  CHECK(s.revision == 3);
  // The communicator is still usable.
  desc.device = FERRY_DEVICE_CPU;
  CHECK(ferry_allreduce(comm, send.data(), recv.data(), send.size(), &desc, nullptr) == FERRY_OK);
  CHECK(recv == send);
  ferry_comm_destroy(comm);
}

TEST_CASE("api: descriptors from before the device fields keep host buffers", "[api][device]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  grow_group(comm, 1);
  std::vector<float> send(64, 2.5f), recv(64, 0.0f);

  // An "old" caller whose desc ends after quant_block: the bytes beyond it are not its own.
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  desc.struct_size = static_cast<uint32_t>(offsetof(ferry_allreduce_desc, device));
  const int garbage = 0x5a5a5a5a;
  std::memcpy(&desc.device, &garbage, sizeof garbage);
  desc.device_index = garbage;
  CHECK(ferry_allreduce(comm, send.data(), recv.data(), send.size(), &desc, nullptr) == FERRY_OK);
  CHECK(recv == send);

  ferry_tensor t;
  ferry_tensor_init(&t);
  t.struct_size = static_cast<uint32_t>(offsetof(ferry_tensor, device_index));
  t.device_index = garbage;
  t.name = "w";
  t.data = recv.data();
  t.count = recv.size();
  ferry_shared_state s;
  ferry_shared_state_init(&s);
  s.struct_size = static_cast<uint32_t>(offsetof(ferry_shared_state, cuda_stream));
  int not_a_stream = garbage;
  s.cuda_stream = &not_a_stream;
  s.tensors = &t;
  s.count = 1;
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_OK);  // a world of one
  CHECK(recv == send);
  ferry_comm_destroy(comm);
}
