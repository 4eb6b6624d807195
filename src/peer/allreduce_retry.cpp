#include "peer/allreduce_retry.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>

#include "core/log.h"

namespace ferry::peer {
namespace {

bool retryable(const Status& st) { return is_retryable(st.code); }

struct Round {
  std::vector<size_t> unfinished;  // job indices, ascending
  std::optional<Status> fatal;
  Status first_retryable;
};

// One pass over `todo`: issue in order, wait in order, stop issuing at the first retryable failure.
Round run_round(Communicator& comm, std::span<const AllreduceJob> jobs, const std::vector<size_t>& todo,
                uint32_t max_in_flight, OpInfo* total) {
  Round round;
  std::deque<std::pair<size_t, std::shared_ptr<AllreduceOp>>> flight;
  size_t next = 0;
  bool stop_issuing = false;
  auto stop = [&](const Status& why) {
    if (stop_issuing) return;
    stop_issuing = true;
    for (auto& [job, op] : flight) op->cancel_if_not_started(why);
  };
  while (true) {
    while (!stop_issuing && next < todo.size() && flight.size() < max_in_flight) {
      const AllreduceJob& job = jobs[todo[next]];
      try {
        flight.emplace_back(todo[next], comm.allreduce_async(job.send, job.recv, job.count, job.spec));
        ++next;
      } catch (const Error& e) {
        Status st = Status::failure(e.code(), e.what());
        if (!retryable(st)) round.fatal = st;
        else if (round.first_retryable.ok()) round.first_retryable = st;
        stop(st);
      }
    }
    if (flight.empty()) break;
    auto [index, op] = flight.front();
    flight.pop_front();
    OpInfo info;
    Status st = op->wait(&info);
    total->bytes_sent += info.bytes_sent;
    total->bytes_received += info.bytes_received;
    total->world_size = info.world_size;
    OpTimeline& most = total->phases;  // each phase: the longest any operation had
    most.start_s = std::max(most.start_s, info.phases.start_s);
    most.longest_stall_s = std::max(most.longest_stall_s, info.phases.longest_stall_s);
    most.commit_s = std::max(most.commit_s, info.phases.commit_s);
    total->agreement_s = std::max(total->agreement_s, info.agreement_s);
    if (st.ok()) continue;
    round.unfinished.push_back(index);
    if (!retryable(st)) {
      if (!round.fatal) round.fatal = st;
    } else if (round.first_retryable.ok()) {
      round.first_retryable = st;
    }
    stop(Status::failure(Errc::peer_lost, "a sibling collective failed: " + st.message));
  }
  round.unfinished.insert(round.unfinished.end(), todo.begin() + static_cast<std::ptrdiff_t>(next), todo.end());
  std::sort(round.unfinished.begin(), round.unfinished.end());
  return round;
}

}  // namespace

Status allreduce_with_retry(Communicator& comm, std::span<const AllreduceJob> jobs, const RetryPolicy& policy,
                            OpInfo* total) {
  auto started = Clock::now();
  *total = {};
  std::map<size_t, std::vector<uint8_t>> inputs;  // in-place jobs' inputs, by job
  for (size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i].send == jobs[i].recv && jobs[i].count > 0) {
      auto* p = static_cast<const uint8_t*>(jobs[i].send);
      inputs[i].assign(p, p + jobs[i].count * dtype_size(jobs[i].spec.dtype));
    }
  std::vector<size_t> todo(jobs.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;

  Status last;
  for (uint32_t attempt = 1;; ++attempt) {
    Round round = run_round(comm, jobs, todo, std::max(policy.max_in_flight, 1u), total);
    total->duration_s = std::chrono::duration<double>(Clock::now() - started).count();
    if (round.fatal) return *round.fatal;
    if (round.unfinished.empty()) return Status::success();
    last = round.first_retryable;
    if (attempt >= policy.max_attempts)
      return Status::failure(last.code, "gave up after " + std::to_string(attempt) + " attempts: " + last.message);
    log().info("all-reduce retry: {} of {} collectives failed ({}); rebuilding the ring", round.unfinished.size(),
               jobs.size(), last.message);
    try {
      comm.update_topology();
    } catch (const Error& e) {
      Status st = Status::failure(e.code(), e.what());
      if (!retryable(st)) return st;
      last = st;  // the vote itself lost a peer: vote again on the next round
    }
    uint32_t world = 0;
    try {
      world = static_cast<uint32_t>(comm.attributes().group_world);
    } catch (const Error& e) {
      return Status::failure(e.code(), e.what());
    }
    if (world < policy.min_world)
      return Status::failure(Errc::peer_lost, "the group shrank to " + std::to_string(world) +
                                                  " peer(s), fewer than " + std::to_string(policy.min_world) +
                                                  " needed to retry: " + last.message);
    for (size_t index : round.unfinished)
      if (auto it = inputs.find(index); it != inputs.end()) std::memcpy(jobs[index].recv, it->second.data(), it->second.size());
    todo = std::move(round.unfinished);
  }
}

}  // namespace ferry::peer
