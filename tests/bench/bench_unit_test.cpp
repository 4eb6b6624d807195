// ferry-bench's arithmetic and formats, without processes: sizes, the JSON
// writer and reader, the peers' report lines, and the nccl-tests figures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "aggregate.h"
#include "bench_args.h"
#include "input_pattern.h"
#include "json.h"
#include "link_matrix.h"
#include "quant_names.h"
#include "rank_report.h"
#include "topology.h"  // stress/wan
#include "wan_link.h"
#include "child_process.h"

using namespace ferry::bench;
using ferry::tooling::fill_input;
using ferry::tooling::hash_hex;
using ferry::tooling::JsonValue;
using ferry::tooling::JsonWriter;
using ferry::tooling::matches_expected;
using ferry::tooling::op_seed;
using ferry::tooling::parse_byte_size;
using ferry::tooling::parse_byte_sizes;
using ferry::tooling::parse_json;

namespace {

// parse_bench_args over a command line written as a list.
std::optional<BenchArgs> parse(std::vector<std::string> words) {
  words.insert(words.begin(), "ferry-bench");
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  return parse_bench_args(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("sizes take binary K/M/G suffixes and print back the same way", "[bench]") {
  CHECK(parse_byte_size("4096") == 4096);
  CHECK(parse_byte_size("64K") == 65536);
  CHECK(parse_byte_size("1m") == 1048576);
  CHECK(parse_byte_size("2G") == std::size_t{2} << 30);
  CHECK(parse_byte_sizes("1M,16M,64M") == std::vector<std::size_t>{1 << 20, 16 << 20, 64 << 20});
  for (const char* bad : {"", "0", "M", "1MB", "-1", "1T", "1,,2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_byte_sizes(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse({"--sizes", "1M,1MB"}), Catch::Contains("bad size '1MB'"));
  CHECK_THROWS_AS(parse({"--sizes", "1M,1MB"}), ArgsError);
  CHECK(format_byte_size(1 << 20) == "1M");
  CHECK(format_byte_size(1536 * 1024) == "1536K");
  CHECK(format_byte_size(1000) == "1000");
}

TEST_CASE("the JSON writer's output reads back", "[bench]") {
  JsonWriter json;
  json.begin_object();
  json.key("text").value("a \"quoted\"\\ line\n\x01");
  json.key("flag").value(true);
  json.key("n").value(std::uint64_t{1} << 40);
  json.key("x").value(0.125);
  json.key("nan").value(std::nan(""));
  json.newline(2).key("list").begin_array().value(1).value(-2).begin_object().end_object().end_array();
  json.newline(0).end_object();

  std::string error;
  const auto parsed = parse_json(json.str(), &error);
  INFO(json.str() << " / " << error);
  REQUIRE(parsed);
  CHECK(parsed->find("text")->string == "a \"quoted\"\\ line\n\x01");
  CHECK(parsed->find("flag")->boolean);
  CHECK(parsed->find("n")->number == 1099511627776.0);
  CHECK(parsed->find("x")->number == 0.125);
  CHECK(parsed->find("nan")->kind == JsonValue::Kind::null);
  REQUIRE(parsed->find("list")->items.size() == 3);
  CHECK(parsed->find("list")->items[1].number == -2);
  CHECK(parsed->find("missing") == nullptr);
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "{\"a\":1} x", "tru", "\"open"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_json(bad));
  }
}

TEST_CASE("a peer's report line survives the trip to the orchestrator", "[bench]") {
  BenchArgs args;
  args.concurrent = 2;
  RankReport sent;
  sent.peer_index = 2;
  sent.rank = 1;
  sent.peer_id = 7;
  sent.world = 3;
  sent.bytes = 1 << 20;
  sent.times_s = {0.5, 0.25};
  sent.bytes_sent = {1398102, 1398100};
  sent.agreement_s = {0.125, 0.0625};
  sent.cpu_s = 0.75;
  sent.hashes = {"0123456789abcdef", "fedcba9876543210"};
  sent.correct = true;
  // Rank 0's link-matrix line comes after its sizes and is no size.
  const std::string out = ferry_report_line(args, sent) + "\n\n" + ferry_report_line(args, sent) + "\n" +
                          link_matrix_line({}) + "\n";
  const auto got = parse_ferry_reports(out, "peer 2");
  REQUIRE(got.size() == 2);
  CHECK(got[1].peer_index == 2);
  CHECK(got[1].rank == 1);
  CHECK(got[1].peer_id == 7);
  CHECK(got[1].bytes == sent.bytes);
  CHECK(got[1].times_s == sent.times_s);
  CHECK(got[1].bytes_sent == sent.bytes_sent);
  CHECK(got[1].agreement_s == sent.agreement_s);
  CHECK(got[1].cpu_s == sent.cpu_s);
  CHECK(got[1].hashes == sent.hashes);
  CHECK(got[1].correct);
  CHECK_THROWS_WITH(parse_ferry_reports("{\"rank\":0}\n", "peer 7"), Catch::Contains("peer 7"));
  CHECK_THROWS(parse_ferry_reports("not json\n", "peer 7"));

  const auto gloo = parse_gloo_reports(
      "{\"rank\":1,\"world\":2,\"bytes\":64,\"dtype\":\"f32\",\"algorithm\":\"allreduce\",\"times_s\":[0.1],"
      "\"result_hash\":\"00000000000000aa\",\"correct\":true}\n",
      "gloo rank 1");
  REQUIRE(gloo.size() == 1);
  CHECK(gloo[0].hashes == std::vector<std::string>{"00000000000000aa"});
  CHECK_FALSE(gloo[0].cpu_s);  // older ferry-gloo-bench builds print none
  CHECK(gloo[0].bytes_sent.empty());
  const auto gloo_cpu = parse_gloo_reports(
      "{\"rank\":0,\"world\":2,\"bytes\":64,\"dtype\":\"f32\",\"algorithm\":\"allreduce\",\"times_s\":[0.1],"
      "\"result_hash\":\"00000000000000aa\",\"correct\":true,\"cpu_s\":0.25}\n",
      "gloo rank 0");
  REQUIRE(gloo_cpu.size() == 1);
  CHECK(gloo_cpu[0].cpu_s == 0.25);
}

namespace {

RankReport report(int rank, std::vector<double> times, std::string hash) {
  RankReport r;
  r.rank = rank;
  r.peer_index = rank;
  r.world = 2;
  r.bytes = 1000;
  r.times_s = std::move(times);
  r.bytes_sent = std::vector<std::uint64_t>(r.times_s.size(), 2000);
  r.cpu_s = 0.5;
  r.hashes = {std::move(hash), "same"};
  r.correct = true;
  return r;
}

}  // namespace

TEST_CASE("rows follow nccl-tests: slowest peer per iteration, median, algbw, busbw", "[bench]") {
  BenchArgs args;
  args.peers = 2;
  args.sizes = {1000};
  args.iters = 3;
  const RunShape shape{"ferry", "ring", 4, 2};
  const std::vector<std::vector<RankReport>> ranks{{report(0, {1.0, 4.0, 2.0}, "h")},
                                                    {report(1, {3.0, 1.0, 2.0}, "h")}};
  const auto runs = summarize(args, shape, ranks);
  REQUIRE(runs.size() == 1);
  const RunSummary& run = runs[0];
  CHECK(run.times_s == std::vector<double>{3.0, 4.0, 2.0});
  CHECK(run.time_s_median == 3.0);
  CHECK(run.time_s_min == 2.0);
  CHECK(run.algbw_GBps == Approx(2 * 1000 / 3.0 / 1e9));
  CHECK(run.busbw_GBps == Approx(run.algbw_GBps));  // 2(N-1)/N = 1 for N = 2
  CHECK(*run.wire_bytes_per_peer == 2000);
  CHECK(run.wire_bytes_ideal == 2000);
  CHECK(*run.cpu_s_per_GB == Approx(1.0 / (2 * 1000 * 3 / 1e9)));
  CHECK(run.bit_identical);
  CHECK(run.correct);
  CHECK_FALSE(run.quant_agreement_s_median);  // no integer-domain quantization: no agreement

  // The scale agreement: slowest rank per iteration, median over iterations.
  auto agreeing = ranks;
  agreeing[0][0].agreement_s = {0.1, 0.4, 0.2};
  agreeing[1][0].agreement_s = {0.3, 0.1, 0.2};
  CHECK(*summarize(args, shape, agreeing)[0].quant_agreement_s_median == 0.3);

  auto differing = ranks;
  differing[1][0].hashes[0] = "other";
  differing[1][0].correct = false;
  const auto bad = summarize(args, shape, differing);
  CHECK_FALSE(bad[0].bit_identical);
  CHECK_FALSE(bad[0].correct);
  CHECK(bad[0].result_hashes.empty());

  auto short_report = ranks;
  short_report[0][0].times_s.pop_back();
  CHECK_THROWS_WITH(summarize(args, shape, short_report), Catch::Contains("ferry rank 0"));
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
}

TEST_CASE("an all-gather's rows follow nccl-tests' all_gather_perf: algbw of the whole result, busbw (N-1)/N of it",
          "[bench][all_gather]") {
  BenchArgs args;
  args.peers = 2;
  args.sizes = {1000};
  args.iters = 3;
  args.collective = "all_gather";
  const RunShape shape{"ferry", "ring", 4, 2};
  const std::vector<std::vector<RankReport>> ranks{{report(0, {1.0, 4.0, 2.0}, "h")},
                                                    {report(1, {3.0, 1.0, 2.0}, "h")}};
  const RunSummary run = summarize(args, shape, ranks)[0];
  CHECK(run.collective == "all_gather");
  CHECK(run.algbw_GBps == Approx(2 * 2 * 1000 / 3.0 / 1e9));  // C ops of N contributions of S, in 3 s
  CHECK(run.busbw_GBps == Approx(run.algbw_GBps / 2));        // (N-1)/N = 1/2: each peer received S a op
  CHECK(run.wire_bytes_ideal == 2 * 1000);                     // (N-1) * C * S
}

TEST_CASE("inputs sum exactly, and the check sees a single wrong element", "[bench]") {
  const std::size_t count = 1000;
  std::vector<float> a(count), b(count), sum(count);
  fill_input(ElemType::f32, a.data(), count, op_seed(0), 0);
  fill_input(ElemType::f32, b.data(), count, op_seed(0), 1);
  for (std::size_t i = 0; i < count; ++i) sum[i] = a[i] + b[i];
  std::size_t first_bad = 0;
  CHECK(matches_expected(ElemType::f32, ReduceKind::sum, sum.data(), count, op_seed(0), 2, &first_bad));
  CHECK_FALSE(matches_expected(ElemType::f32, ReduceKind::sum, sum.data(), count, op_seed(1), 2, &first_bad));
  sum[517] += 0.125f;
  CHECK_FALSE(matches_expected(ElemType::f32, ReduceKind::sum, sum.data(), count, op_seed(0), 2, &first_bad));
  CHECK(first_bad == 517);
  CHECK(hash_hex(a.data(), 0) == "2d06800538d394c2");  // XXH3-64 of nothing
}

TEST_CASE("the default deadline leaves a lossy link's single streams time to finish", "[bench]") {
  // The issue's WAN run: 3 peers, 64 MiB, 3 iterations after 1 warmup. Gloo's ring
  // (one cubic stream a neighbour) measured ~1 MB/s of busbw across it (~90 s an op).
  BenchArgs args;
  args.peers = 3;
  args.sizes = {64 << 20};
  args.iters = 3;
  args.warmup = 1;
  args.wan = "rtt=50ms,loss=0.1%,rate=200mbit";
  const double ring_bytes = 2.0 * (args.peers - 1) / args.peers * (64 << 20);
  CHECK(run_deadline_s(args) > (args.iters + args.warmup) * ring_bytes / 1e6);
  // ...and one loss-limited stream is the floor: without loss the link rate bounds it instead.
  CHECK(slowest_plausible_Bps(args) < 1e6);
  args.wan = "rtt=50ms,rate=200mbit";
  CHECK(slowest_plausible_Bps(args) == Approx(10e6));
  args.wan = "rtt=50ms,rate=8mbit";
  CHECK(slowest_plausible_Bps(args) == Approx(0.5e6));
  args.wan.clear();
  CHECK(slowest_plausible_Bps(args) == Approx(20e6));
  args.timeout_s = 5;
  CHECK(run_deadline_s(args) == 5);
}

TEST_CASE("a topology's link rate is the smallest link or cap among the run's hosts", "[bench]") {
  const auto topology = ferry::wan::Topology::parse_json(R"({
    "defaults": {"rtt": "50ms", "loss": "0", "uplink": "200mbit"},
    "hosts": [{"name": "a", "region": "r"}, {"name": "b", "region": "r", "downlink": "100mbit"},
              {"name": "c", "region": "r"}, {"name": "d", "region": "r"}],
    "links": [{"from": "c", "to": "a", "rate": "20mbit"},
              {"between": ["a", "d"], "loss": "1%", "rtt": "200ms"}]})",
                                                         "test.json");
  // Hosts a and b: b's downlink.
  WanLinkBudget two = topology_link_budget(topology, 2);
  CHECK(two.rate_bps == 100e6);
  CHECK(two.rate_from == "downlink of b");
  CHECK(two.loss == 0);
  CHECK(std::isinf(loss_limited_stream_Bps(two.rtt_ms, two.loss)));
  // c joins: the ring may run c -> a, whatever order the master picks.
  WanLinkBudget three = topology_link_budget(topology, 3);
  CHECK(three.rate_bps == 20e6);
  CHECK(three.rate_from == "cap c -> a");
  // d joins: the lossy long pair is what limits one stream.
  WanLinkBudget four = topology_link_budget(topology, 4);
  CHECK(four.rate_from == "cap c -> a");
  CHECK(four.rtt_ms == 200);
  CHECK(four.loss == Approx(0.01));

  BenchArgs args;
  args.peers = 3;
  args.wan = "rtt=50ms,loss=0.1%,rate=200mbit";
  const std::optional<WanLinkBudget> spec = wan_link_budget(args);
  REQUIRE(spec);
  CHECK(spec->rate_bps == 200e6);
  CHECK(spec->rate_from == "--wan rate");
  args.wan.clear();
  CHECK_FALSE(wan_link_budget(args));
}

TEST_CASE("the link matrix line survives the trip, and its ends get the run's names", "[bench]") {
  LinkMeasurement link;
  link.from.peer_id = 4;
  link.to.peer_id = 9;
  link.goodput_Bps = 2.5e6;
  link.delivery_rate_Bps = 3e6;
  link.rtt_ms = 51.5;
  link.retransmit_ratio = 0.01;
  link.bytes = 1 << 22;
  link.age_s = 0.25;
  const auto line = parse_json(link_matrix_line({link, link}));
  REQUIRE(line);
  std::optional<std::vector<LinkMeasurement>> got = parse_link_matrix_line(*line);
  REQUIRE(got);
  REQUIRE(got->size() == 2);
  const LinkMeasurement& back = (*got)[1];
  CHECK(back.from.peer_id == 4);
  CHECK(back.to.peer_id == 9);
  CHECK_FALSE(back.shared_memory);
  CHECK(back.goodput_Bps == 2.5e6);
  CHECK(back.delivery_rate_Bps == 3e6);
  CHECK(back.rtt_ms == 51.5);
  CHECK(back.retransmit_ratio == 0.01);
  CHECK(back.bytes == link.bytes);
  CHECK(back.age_s == 0.25);
  CHECK_FALSE(parse_link_matrix_line(*parse_json(R"({"rank":0})")));

  name_link_ends(*got, {{4, {4, 1, 0, "site-a"}}});
  CHECK(back.from.rank == 1);
  CHECK(back.from.peer_index == 0);
  CHECK(back.from.host == "site-a");
  CHECK(back.to.rank == -1);  // no peer of this run: written as null
  JsonWriter json;
  json.begin_object();
  write_link_matrix(json, *got);
  json.end_object();
  const auto written = parse_json(json.str());
  REQUIRE(written);
  const JsonValue& first = written->find("link_matrix")->items.at(0);
  CHECK(first.find("from")->find("host")->string == "site-a");
  CHECK(first.find("to")->find("rank")->kind == JsonValue::Kind::null);
  CHECK(first.find("goodput_bytes_per_s")->number == 2.5e6);
}

TEST_CASE("every reduction of ferry's is an --op choice and reaches the peers", "[bench]") {
  for (const std::string op : {"sum", "avg", "prod", "min", "max"}) {
    CAPTURE(op);
    const std::optional<BenchArgs> args = parse({"--op", op});
    REQUIRE(args);
    CHECK(reduce_kind_name(args->op) == op);
    const std::vector<std::string> forwarded = peer_forwarded_args(*args);
    const auto at = std::find(forwarded.begin(), forwarded.end(), "--op");
    REQUIRE(forwarded.end() - at >= 2);
    CHECK(at[1] == op);
  }
  CHECK(parse({"--op", "PROD"})->op == ReduceKind::prod);
  CHECK_THROWS_AS(parse({"--op", "mean"}), ArgsError);
  CHECK_THROWS_WITH(parse({"--op", "avg", "--baseline", "gloo"}), Catch::Contains("sum only"));
}

TEST_CASE("the library's quantization names are the --quant choices", "[bench]") {
  const std::vector<std::string> names = ferry::tooling::quant_names();
  CHECK(names ==
        std::vector<std::string>{"none", "u8", "i8", "f16", "bf16", "u4", "i8h", "i4h", "i8h-sr", "i4h-sr"});
  for (const std::string& name : names) {
    CAPTURE(name);
    const std::optional<ferry_quant> quant = ferry::tooling::parse_quant(name);
    REQUIRE(quant);
    CHECK(ferry_quant_name(*quant) == name);
    REQUIRE(parse({"--quant", name}));
  }
  CHECK_FALSE(ferry::tooling::parse_quant("unknown"));
  CHECK_THROWS_AS(parse({"--quant", "u2"}), ArgsError);
}

TEST_CASE("avg's expected result divides the exact sum once, and prod's inputs multiply exactly", "[bench]") {
  constexpr std::size_t count = 4096;
  constexpr int world = 3;
  const std::uint64_t seed = op_seed(0);

  std::vector<float> f[world];
  std::vector<std::int32_t> i[world];
  for (int r = 0; r < world; ++r) {
    f[r].resize(count);
    i[r].resize(count);
    fill_input(ElemType::f32, ReduceKind::avg, f[r].data(), count, seed, r);
    fill_input(ElemType::i32, ReduceKind::avg, i[r].data(), count, seed, r);
  }
  std::vector<float> f_avg(count);
  std::vector<std::int32_t> i_avg(count), i_floor(count);
  for (std::size_t k = 0; k < count; ++k) {
    f_avg[k] = (f[0][k] + f[1][k] + f[2][k]) / 3.0f;
    const std::int32_t sum = i[0][k] + i[1][k] + i[2][k];
    i_avg[k] = sum / 3;  // toward zero, as ferry_reduce_op says
    i_floor[k] = static_cast<std::int32_t>(std::floor(sum / 3.0));
  }
  std::size_t first_bad = 0;
  CHECK(matches_expected(ElemType::f32, ReduceKind::avg, f_avg.data(), count, seed, world, &first_bad));
  CHECK(matches_expected(ElemType::i32, ReduceKind::avg, i_avg.data(), count, seed, world, &first_bad));
  CHECK_FALSE(matches_expected(ElemType::i32, ReduceKind::avg, i_floor.data(), count, seed, world, &first_bad));
  CHECK_FALSE(matches_expected(ElemType::f32, ReduceKind::sum, f_avg.data(), count, seed, world, &first_bad));

  // prod: +-1 and +-2, so 40 peers' product overflows i32 and must wrap as ferry's does.
  constexpr int many = 40;
  std::vector<double> product(count, 1.0);
  std::vector<std::uint32_t> wrapped(count, 1);
  std::vector<std::int32_t> input(count);
  bool factors_only = true;
  for (int r = 0; r < many; ++r) {
    fill_input(ElemType::i32, ReduceKind::prod, input.data(), count, seed, r);
    for (std::size_t k = 0; k < count; ++k) {
      factors_only = factors_only && (input[k] == 1 || input[k] == -1 || input[k] == 2 || input[k] == -2);
      product[k] *= input[k];
      wrapped[k] *= static_cast<std::uint32_t>(input[k]);
    }
  }
  CHECK(factors_only);
  std::vector<float> f_product(product.begin(), product.end());  // powers of two up to 2^40: exact
  std::vector<std::int32_t> i_product(count);
  for (std::size_t k = 0; k < count; ++k) i_product[k] = static_cast<std::int32_t>(wrapped[k]);
  CHECK(std::any_of(product.begin(), product.end(), [](double p) { return std::fabs(p) > 0x1p31; }));
  CHECK(matches_expected(ElemType::f32, ReduceKind::prod, f_product.data(), count, seed, many, &first_bad));
  CHECK(matches_expected(ElemType::i32, ReduceKind::prod, i_product.data(), count, seed, many, &first_bad));
  CHECK_FALSE(matches_expected(ElemType::f32, ReduceKind::prod, f_product.data(), count, seed, many - 1, &first_bad));
}

// A loaded machine may not run the harness between two children's ends: both are found in
// one look, and only the set's own order tells them apart, which says nothing of which
// ended first (ferry-bench then names every child of that look as first to end).
TEST_CASE("child processes found ended in one look share it, and a later end is a later look", "[bench][children]") {
  using namespace ferry::tooling;
  ChildSet children(false);
  Child& a = children.spawn("a", {"/bin/sh", "-c", "exit 3"});
  Child& b = children.spawn("b", {"/bin/sh", "-c", "exit 4"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both end before the set looks
  REQUIRE(children.pump_until([&] { return !a.running() && !b.running(); },
                              std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  CHECK(a.end_look() == 1);
  CHECK(b.end_look() == 1);
  CHECK(a.end_order() != b.end_order());
  Child& c = children.spawn("c", {"/bin/sh", "-c", "sleep 0.2; exit 5"});
  CHECK(c.end_look() == 0);
  REQUIRE(children.pump_until([&] { return !c.running(); }, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  CHECK(c.end_look() == 2);
  CHECK(c.exit_code() == std::optional<int>(5));
}
