// The meter's outputs fed a stream of reports, for bench/meter_outputs_bench.py: the CPU time of
// each output on the writing thread (what the meter's output thread spends), per report.
//
//   kwatt_meter_outputs_bench --targets T --domains D --reports N [--churn] [--max-targets M]
//                             [--prometheus] [--output SPEC]...
//
// Reports are made first (src/testing/meter_reports.h: the real cputime attribution), then written
// to each output in turn: Begin, N x Write, Finish. --prometheus also renders the exposition and
// takes its text at each report (a scrape per interval). --churn gives every report new targets
// (short-lived processes). Prints one JSON object per output on standard output.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kwatt/core/json_text.h"
#include "kwatt/meter/outputs/outputs.h"
#include "src/testing/meter_reports.h"

namespace {

using namespace kwatt;
using namespace kwatt::meter;

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Print(const std::string& name, double cpu, double wall, int64_t reports, int64_t rows,
           int64_t dropped, int64_t bytes, int64_t lines, const std::string& error) {
  std::string out = "{\"output\":";
  AppendJsonString(&out, name);
  out += ",\"cpu_s\":";
  AppendJsonNumber(&out, cpu);
  out += ",\"wall_s\":";
  AppendJsonNumber(&out, wall);
  out += ",\"reports\":" + std::to_string(reports) + ",\"rows\":" + std::to_string(rows) +
         ",\"dropped\":" + std::to_string(dropped) + ",\"bytes\":" + std::to_string(bytes) +
         ",\"lines\":" + std::to_string(lines) + ",\"error\":";
  AppendJsonString(&out, error);
  out += "}\n";
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int targets = 10, domains = 2, reports = 100, max_targets = 10;
  bool churn = false, prometheus = false;
  std::vector<std::string> specs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--targets") {
      targets = std::atoi(value().c_str());
    } else if (arg == "--domains") {
      domains = std::atoi(value().c_str());
    } else if (arg == "--reports") {
      reports = std::atoi(value().c_str());
    } else if (arg == "--max-targets") {
      max_targets = std::atoi(value().c_str());
    } else if (arg == "--churn") {
      churn = true;
    } else if (arg == "--prometheus") {
      prometheus = true;
    } else if (arg == "--output") {
      specs.push_back(value());
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  std::vector<Domain> domain_list;
  for (int d = 0; d < domains; ++d) {
    int socket = d / 2;
    domain_list.push_back(
        d % 2 == 0 ? testing::RaplDomain("package-" + std::to_string(socket), "package", socket)
                   : testing::RaplDomain("dram-" + std::to_string(socket), "dram", socket));
  }
  MeterHeader header = testing::TestHeader(domain_list);
  testing::ReportBuilder builder(header);
  std::vector<double> watts, idle;
  for (int d = 0; d < domains; ++d) {
    watts.push_back(d % 2 == 0 ? 80.0 : 12.0);
    idle.push_back(d % 2 == 0 ? 20.0 : 3.0);
  }
  std::vector<IntervalReport> all;
  all.reserve(size_t(reports));
  for (int r = 0; r < reports; ++r) {
    std::vector<testing::Activity> activity;
    for (int t = 0; t < targets; ++t) {
      int64_t pid = churn ? 100000 + int64_t(r) * targets + t : 100 + t;
      activity.push_back({testing::ProcessTarget(pid, "worker-" + std::to_string(t % 50)),
                          int64_t(1000 + (t * 37 + r * 11) % 5000)});
    }
    all.push_back(builder.Next(watts, std::move(activity), -1, idle));
  }

  OutputOptions options;
  options.node = "nova-1";
  options.site = "lyon";
  options.max_targets = max_targets;
  options.finish_seconds = 60;
  options.credentials_file = "/nonexistent/python-grid5000.yaml";
  for (const std::string& spec : specs) {
    Result<std::unique_ptr<OutputSink>> output = OpenOutput(spec, options);
    if (!output.ok()) {
      Print(spec, 0, 0, 0, 0, 0, 0, 0, output.status().ToString());
      continue;
    }
    std::string error;
    double cpu = ThreadCpuSeconds(), wall = WallSeconds();
    Status status = (*output)->Begin(header);
    for (size_t r = 0; status.ok() && r < all.size(); ++r) status = (*output)->Write(all[r]);
    Status finished = (*output)->Finish();
    cpu = ThreadCpuSeconds() - cpu;
    wall = WallSeconds() - wall;
    if (!status.ok()) error = status.ToString();
    if (!finished.ok() && error.empty()) error = finished.ToString();
    OutputStats stats = (*output)->Stats();
    Print((*output)->Name(), cpu, wall, stats.reports, stats.rows_written, stats.rows_dropped, 0, 0,
          error);
  }
  if (prometheus) {
    PrometheusExposition exposition(options);
    double cpu = ThreadCpuSeconds(), wall = WallSeconds();
    Status status = exposition.Begin(header);
    size_t bytes = 0;
    for (size_t r = 0; status.ok() && r < all.size(); ++r) {
      status = exposition.Write(all[r]);
      bytes = exposition.Text().size();  // a scrape per interval
    }
    cpu = ThreadCpuSeconds() - cpu;
    wall = WallSeconds() - wall;
    std::string text = exposition.Text();
    int64_t lines = 0;  // samples (series), not # lines
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      if (text[at] != '#') ++lines;
      at = end + 1;
    }
    Print("prometheus", cpu, wall, exposition.Stats().reports, exposition.Stats().rows_written, 0,
          int64_t(bytes), lines, status.ok() ? "" : status.ToString());
  }
  return 0;
}
