// Times the wattmeter's line stream (src/collect/wattmetre.h) on a file of lines, e.g. from
// `kwatt simulate wattmetre --fast --truth TRUTH`, and checks the rows against that truth.
//
// Usage: kwatt_wattmetre_bench LINES [--version N] [--truth TRUTH.json] [--mapping MAP.yaml]
//
// Reads LINES with a WattmetreSource (as `kwatt collect` would read a wattmetre:// path) and
// prints one line of JSON: lines, rows, seconds (steady_clock around Run), us_per_line and, with
// --truth, the worst relative difference between a port's integrated rows (each second's mean
// times one second, or the second's share covered at the window's ends) and its true energy.
// Then parses the file's lines alone again (ParseWattmetreLine, no I/O) and prints
// parse_us_per_line and parse_ns_per_port. Exit status 1 on an error, 2 on bad arguments.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stop_token>
#include <string>
#include <vector>

#include "src/collect/wattmetre.h"

using namespace kwatt;
using namespace kwatt::collect;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kwatt_wattmetre_bench LINES [--version N] [--truth TRUTH.json] "
                 "[--mapping MAP.yaml]\n");
    return 2;
  }
  std::string path = argv[1], truth_path, mapping;
  int version = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--version") {
      version = std::atoi(argv[i + 1]);
    } else if (a == "--truth") {
      truth_path = argv[i + 1];
    } else if (a == "--mapping") {
      mapping = argv[i + 1];
    } else {
      return 2;
    }
  }
  nlohmann::json truth;
  std::string id = "wattmetre1";
  if (!truth_path.empty()) {
    std::ifstream in(truth_path);
    truth = nlohmann::json::parse(in);
    id = truth["wattmetre"].get<std::string>();
  }
  WattmetreSourceOptions options;
  options.version = version;
  options.averager.wattmetre_id = id;
  options.open = OpenWattmetrePath(path);
  options.name = path;
  if (!mapping.empty()) {
    auto nodes = ReadWattmetreMapping(mapping);
    if (!nodes.ok()) {
      std::fprintf(stderr, "%s\n", nodes.status().ToString().c_str());
      return 1;
    }
    options.averager.nodes = *nodes;
  }
  WattmetreSource source(options);
  std::map<std::string, double> joules;
  int64_t rows = 0;
  UnixNanos start = truth.is_null() ? 0 : truth["start_ns"].get<int64_t>();
  UnixNanos end = truth.is_null() ? 0 : truth["end_ns"].get<int64_t>();
  auto begin = std::chrono::steady_clock::now();
  Status status = source.Run(std::stop_source().get_token(), {},
                             [&](std::vector<Reading>&& batch) {
                               for (const Reading& r : batch) {
                                 ++rows;
                                 double covered = 1.0;
                                 if (end > start) {
                                   UnixNanos a = std::max(r.time, start),
                                             b = std::min(r.time + kNanosPerSecond, end);
                                   covered = double(b - a) / 1e9;
                                 }
                                 joules[r.device_id] += r.value * covered;
                               }
                             },
                             /*say=*/{});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (status.code() != Status::Code::kUnavailable) {  // the file's end is the expected one
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  WattmetreCounts counts = source.counts();
  double worst = 0;
  if (!truth.is_null()) {
    for (const auto& [port, value] : truth["ports"].items()) {
      double expected = value["joules"].get<double>();
      worst = std::max(worst, std::fabs(joules[port] - expected) / expected);
    }
  }
  // The parser alone, on lines in memory.
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  WattmetreEntry entry;
  size_t ports = 0;
  auto parse_begin = std::chrono::steady_clock::now();
  for (const std::string& line : lines) {
    if (ParseWattmetreLine(line, version, &entry) == WattmetreLine::kEntry) {
      ports += entry.port_count();
    }
  }
  double parse_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - parse_begin).count();
  std::printf(
      "{\"lines\": %lld, \"rows\": %lld, \"seconds\": %.4f, \"us_per_line\": %.3f, "
      "\"worst_relative_difference\": %.3g, \"parse_us_per_line\": %.3f, "
      "\"parse_ns_per_port\": %.1f, \"skipped\": %lld, \"malformed\": %lld, \"gaps\": %lld}\n",
      static_cast<long long>(counts.lines), static_cast<long long>(rows), seconds,
      seconds * 1e6 / double(counts.lines), worst, parse_seconds * 1e6 / double(lines.size()),
      parse_seconds * 1e9 / double(ports), static_cast<long long>(counts.skipped_lines),
      static_cast<long long>(counts.malformed_lines), static_cast<long long>(counts.gaps));
  return 0;
}
