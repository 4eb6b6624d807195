// diloco_libtorch.cpp: DiLoCo in C++ with libtorch, over ferry's C API.
//
// Each peer fits a small MLP to a fixed "teacher" network on data of its own (seeded by
// --rank-seed): H inner AdamW steps, then the peers average their pseudo-gradients (outer
// weights - local weights) with one ferry_allreduce (optionally quantized: --quant u8|u4) and
// apply it with an outer Nesterov SGD. A shared-state sync at the start gives every peer the
// same outer weights. When a peer dies the survivors vote a new ring (ferry_update_topology)
// and redo the all-reduce; the result is bit-identical everywhere, printed as a hash at the end.
// (Peers joining mid-run need the fuller protocol of examples/python/elastic.py.)
//
//   ferry-diloco-libtorch --master 127.0.0.1:48148 --peers 2 --rank-seed 0 &
//   ferry-diloco-libtorch --master 127.0.0.1:48148 --peers 2 --rank-seed 1
#include <ferry/ferry.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(ferry_result r, const char* what) {
  if (r != FERRY_OK) throw std::runtime_error(std::string(what) + ": " + ferry_strerror(r) + ": " + ferry_last_error());
}

torch::nn::Sequential make_mlp(int64_t in, int64_t hidden, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, 1));
}

// The task: y = teacher(x) for x ~ N(0, 1); the teacher is the same on every peer.
struct Task {
  torch::nn::Sequential teacher = make_mlp(16, 32, 12345);
  torch::Tensor sample(int64_t n, torch::Generator& gen) {
    torch::NoGradGuard no_grad;
    auto x = torch::randn({n, 16}, gen);
    return torch::cat({x, teacher->forward(x)}, 1);
  }
};

std::vector<torch::Tensor> clone_params(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.detach().clone().requires_grad_(true));
  return out;
}

uint64_t fnv1a(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ULL;
  for (auto& t : tensors) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    auto bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

// Collective: every peer's outer weights become the group's (the same seed makes them equal
// already; a peer started with another --seed is corrected here).
void sync_outer(ferry_comm* comm, std::vector<torch::Tensor>& outer) {
  std::vector<std::string> names;
  std::vector<ferry_tensor> tensors(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) names.push_back("outer." + std::to_string(i));
  for (size_t i = 0; i < outer.size(); ++i) {
    ferry_tensor_init(&tensors[i]);
    tensors[i].name = names[i].c_str();
    tensors[i].data = outer[i].data_ptr();
    tensors[i].count = static_cast<size_t>(outer[i].numel());
    tensors[i].dtype = FERRY_F32;
  }
  ferry_shared_state state;
  ferry_shared_state_init(&state);
  state.revision = 1;
  state.tensors = tensors.data();
  state.count = tensors.size();
  check(ferry_sync_shared_state(comm, &state, FERRY_SYNC_ENFORCE_POPULAR, nullptr), "sync_shared_state");
}

}  // namespace

int main(int argc, char** argv) {
  std::string master, quant = "none", device_name = "cpu";
  int peers = 1, outer_steps = 10, inner_steps = 50, hidden = 64, batch = 64;
  uint64_t rank_seed = 0, seed = 0;
  double inner_lr = 1e-3, outer_lr = 0.7, outer_momentum = 0.9;
  CLI::App app{"DiLoCo with libtorch over ferry's C API"};
  app.add_option("--master", master, "HOST:PORT of the ferry master")->required();
  app.add_option("--peers", peers, "wait for this many peers before training");
  app.add_option("--outer-steps", outer_steps);
  app.add_option("--inner-steps", inner_steps);
  app.add_option("--hidden", hidden);
  app.add_option("--batch", batch);
  app.add_option("--inner-lr", inner_lr);
  app.add_option("--outer-lr", outer_lr);
  app.add_option("--outer-momentum", outer_momentum);
  app.add_option("--seed", seed, "model initialisation (the same on every peer)");
  app.add_option("--rank-seed", rank_seed, "this peer's data stream");
  app.add_option("--quant", quant, "pseudo-gradient wire format")->check(CLI::IsMember({"none", "u8", "u4"}));
  app.add_option("--device", device_name, "cpu or cuda");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  const torch::Device device(device_name);

  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = master.c_str();
  params.p2p_listen_host = "127.0.0.1";
  ferry_comm* comm = nullptr;
  try {
    check(ferry_comm_create(&params, &comm), "comm_create");
    check(ferry_connect(comm), "connect");
    int64_t world = 0;
    // Accepted peers admit newcomers together, until the ring has everyone (as hello.c).
    while (check(ferry_comm_get_attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE, &world), "world"), world < peers)
      check(ferry_update_topology(comm), "update_topology");

    Task task;
    auto model = make_mlp(16, hidden, seed);
    model->to(device);
    auto local = model->parameters();
    auto outer = clone_params(*model);
    for (auto& o : outer) o = o.detach().to(torch::kCPU).requires_grad_(true);
    sync_outer(comm, outer);
    torch::optim::AdamW inner(local, torch::optim::AdamWOptions(inner_lr));
    torch::optim::SGD outer_opt(outer, torch::optim::SGDOptions(outer_lr).momentum(outer_momentum).nesterov(true));
    torch::Generator gen = torch::make_generator<torch::CPUGeneratorImpl>(1000 + rank_seed);
    torch::Generator test_gen = torch::make_generator<torch::CPUGeneratorImpl>(7);
    auto test = task.sample(1024, test_gen).to(device);

    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    desc.op = FERRY_OP_AVG;
    desc.quant = quant == "u8" ? FERRY_QUANT_U8 : quant == "u4" ? FERRY_QUANT_U4 : FERRY_QUANT_NONE;
    uint64_t sent = 0;
    for (int step = 0; step < outer_steps; ++step) {
      {  // local weights start from the outer weights
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < local.size(); ++i) local[i].copy_(outer[i]);
      }
      double train_loss = 0;
      for (int h = 0; h < inner_steps; ++h) {
        auto b = task.sample(batch, gen).to(device);
        inner.zero_grad();
        auto loss = torch::mse_loss(model->forward(b.narrow(1, 0, 16)), b.narrow(1, 16, 1));
        loss.backward();
        inner.step();
        train_loss += loss.item<double>() / inner_steps;
      }
      std::vector<torch::Tensor> deltas;
      for (size_t i = 0; i < local.size(); ++i) deltas.push_back((outer[i] - local[i].detach().to(torch::kCPU)).reshape(-1));
      auto pseudo = torch::cat(deltas).contiguous();
      auto mean = torch::empty_like(pseudo);
      ferry_op_info info = {sizeof(ferry_op_info), 0, 0, 0, 0};
      ferry_result r;
      // A lost peer: the survivors re-form the ring and redo it (`pseudo` is intact).
      while ((r = ferry_allreduce(comm, pseudo.data_ptr(), mean.data_ptr(), static_cast<size_t>(pseudo.numel()),
                                  &desc, &info)) != FERRY_OK && ferry_result_is_retryable(r)) {
        std::fprintf(stderr, "step %d: %s; re-forming the ring\n", step, ferry_last_error());
        while (ferry_result_is_retryable(r = ferry_update_topology(comm))) {
        }
        check(r, "update_topology");
      }
      check(r, "allreduce");
      sent += info.bytes_sent;
      int64_t offset = 0;
      for (auto& o : outer) {
        o.mutable_grad() = mean.narrow(0, offset, o.numel()).view_as(o);
        offset += o.numel();
      }
      outer_opt.step();
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < local.size(); ++i) local[i].copy_(outer[i]);
      double held_out = torch::mse_loss(model->forward(test.narrow(1, 0, 16)), test.narrow(1, 16, 1)).item<double>();
      std::printf("step %3d | loss %.5f | held-out %.5f | world %u | sent %.1f kB\n", step, train_loss, held_out,
                  info.world_size, static_cast<double>(sent) / 1e3);
      std::fflush(stdout);
    }
    std::printf("final | weights %016llx\n", static_cast<unsigned long long>(fnv1a(outer)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-diloco-libtorch: %s\n", e.what());
    ferry_comm_destroy(comm);
    return 1;
  }
  ferry_comm_destroy(comm);
  return 0;
}
