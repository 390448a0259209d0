// `kwatt inspect DIR [--verify] [--json]`: what an archive holds, and whether it is intact.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/lock.h"
#include "kwatt/archive/reader.h"

namespace kwatt::cli {
namespace {

std::string Size(double bytes) { return HumanBytes(bytes); }

std::string Duration(UnixNanos nanos) {
  int64_t s = nanos / kNanosPerSecond;
  char text[64];
  if (s >= 86400) {
    std::snprintf(text, sizeof text, "%lld d %lld h %lld min", (long long)(s / 86400),
                  (long long)(s % 86400 / 3600), (long long)(s % 3600 / 60));
  } else if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lld h %lld min", (long long)(s / 3600),
                  (long long)(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(text, sizeof text, "%lld min %lld s", (long long)(s / 60), (long long)(s % 60));
  } else {
    std::snprintf(text, sizeof text, "%.3f s", double(nanos) / kNanosPerSecond);
  }
  return text;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "-" : out;
}

std::string QueryText(const archive::Manifest& m) {
  std::string out;
  if (!m.query.job_site.empty()) {
    out += "job " + m.query.job_site + ":" + std::to_string(m.query.job_id);
  }
  if (!m.query.nodes.empty()) {
    out += (out.empty() ? "" : ", ") + std::string("nodes ") + Join(m.query.nodes);
  }
  if (!m.query.start.empty() || !m.query.end.empty()) {
    out += (out.empty() ? "" : ", ") + std::string("from ") +
           (m.query.start.empty() ? "the job's start" : m.query.start) + " to " +
           (!m.query.end.empty()       ? m.query.end
            : m.query.job_site.empty() ? std::string("its stop (a recording)")
                                       : std::string("the job's end"));
  }
  out += (out.empty() ? "" : ", ") + std::string("metrics ") +
         (m.query.metrics.empty() ? "all" : Join(m.query.metrics));
  if (m.query.summary) out += ", 5-minute summaries";
  if (!m.query.api.empty()) out += ", from " + m.query.api;
  return out;
}

std::string StateText(const archive::Manifest& m) {
  if (m.complete) {
    return "COMPLETE (created " + m.created_at +
           (m.completed_at.empty() ? "" : ", completed " + m.completed_at) + ")";
  }
  return "INCOMPLETE: " + archive::IncompleteArchiveMessage(m);
}

void PrintText(const archive::Manifest& m) {
  std::printf("archive    %s (kwatt archive format %d, written by kwatt %s)\n", m.dir.c_str(),
              m.format_version, m.kwatt_version.empty() ? "?" : m.kwatt_version.c_str());
  std::printf("state      %s\n", StateText(m).c_str());
  if (m.has_window) {
    std::printf("window     %s .. %s Europe/Paris (%s)\n",
                FormatParisTimestamp(m.window_start).c_str(),
                FormatParisTimestamp(m.window_end).c_str(),
                Duration(m.window_end - m.window_start).c_str());
    std::printf("           %s .. %s UTC\n", FormatUtcTimestamp(m.window_start).c_str(),
                FormatUtcTimestamp(m.window_end).c_str());
  } else {
    std::printf("window     not resolved yet\n");
  }
  std::printf("query      %s\n", QueryText(m).c_str());
  std::printf("sites      %s\n", Join(m.sites).c_str());
  if (!m.job_types.empty()) std::printf("job types  %s\n", Join(m.job_types).c_str());
  std::vector<std::string> nodes;
  for (const archive::ManifestNode& node : m.nodes) nodes.push_back(node.node);
  std::printf("nodes      %zu: %s\n", nodes.size(), Join(nodes).c_str());
  std::vector<std::string> metrics;
  for (const auto& [metric, rows] : m.MetricRows()) {
    metrics.push_back(metric + " (" + std::to_string(rows) + " rows)");
  }
  if (metrics.size() <= 6) {
    std::printf("metrics    %zu: %s\n", metrics.size(), Join(metrics).c_str());
  } else {
    std::printf("metrics    %zu (their rows per node below)\n", metrics.size());
  }
  int64_t rows = m.rows(), bytes = m.bytes();
  std::printf("rows       %lld in %zu files, %s on disk", (long long)rows, m.files.size(),
              Size(double(bytes)).c_str());
  if (rows > 0) std::printf(" (%.1f bytes per row)", double(bytes) / double(rows));
  std::printf("\n");
  if (m.fetch) {
    std::printf("fetch      %lld requests, %lld retries, %lld splits, %.2f s\n",
                (long long)m.fetch->requests, (long long)m.fetch->retries,
                (long long)m.fetch->splits, m.fetch->seconds);
  }
  if (m.files.empty()) return;
  std::printf("\n%-44s %12s %10s  %-32s %s\n", "node / metric", "rows", "on disk", "first", "last");
  for (const archive::ManifestFile& file : m.files) {
    std::string name = file.node.empty() ? "other devices of " + file.site : file.node;
    std::printf("%-44s %12lld %10s  %-32s %s\n", name.c_str(), (long long)file.rows,
                Size(double(file.bytes)).c_str(), file.first.empty() ? "-" : file.first.c_str(),
                file.last.empty() ? "-" : file.last.c_str());
    for (const auto& [metric, count] : file.metrics) {
      std::printf("  %-42s %12lld\n", metric.c_str(), (long long)count);
    }
  }
}

nlohmann::ordered_json ToJson(const archive::Manifest& m) {
  using Json = nlohmann::ordered_json;
  Json out;
  out["dir"] = m.dir;
  out["format_version"] = m.format_version;
  out["kwatt_version"] = m.kwatt_version;
  out["state"] = m.complete ? "complete" : "incomplete";
  out["complete"] = m.complete;
  if (!m.complete) out["todo"] = StateText(m);
  out["created_at"] = m.created_at;
  out["completed_at"] = m.completed_at.empty() ? Json(nullptr) : Json(m.completed_at);
  if (m.has_window) {
    out["window"] = {{"start", FormatUtcTimestamp(m.window_start)},
                     {"end", FormatUtcTimestamp(m.window_end)},
                     {"start_paris", FormatParisTimestamp(m.window_start)},
                     {"end_paris", FormatParisTimestamp(m.window_end)}};
  } else {
    out["window"] = nullptr;
  }
  Json query;
  query["api"] = m.query.api;
  query["nodes"] = m.query.nodes;
  query["start"] = m.query.start.empty() ? Json(nullptr) : Json(m.query.start);
  query["end"] = m.query.end.empty() ? Json(nullptr) : Json(m.query.end);
  query["job"] = m.query.job_site.empty()
                     ? Json(nullptr)
                     : Json({{"site", m.query.job_site}, {"id", m.query.job_id}});
  query["metrics"] = m.query.metrics;
  query["summary"] = m.query.summary;
  out["query"] = query;
  out["sites"] = m.sites;
  out["job_types"] = m.job_types;
  Json nodes = Json::array();
  for (const archive::ManifestNode& node : m.nodes) {
    nodes.push_back({{"node", node.node},
                     {"uid", node.uid},
                     {"site", node.site},
                     {"cluster", node.cluster},
                     {"file", node.file}});
  }
  out["nodes"] = nodes;
  Json metrics = Json::object();
  for (const auto& [metric, rows] : m.MetricRows()) metrics[metric] = rows;
  out["metrics"] = metrics;
  out["rows"] = m.rows();
  out["bytes"] = m.bytes();
  Json files = Json::array();
  for (const archive::ManifestFile& f : m.files) {
    Json file_metrics = Json::object();
    for (const auto& [metric, rows] : f.metrics) file_metrics[metric] = rows;
    files.push_back({{"path", f.path},
                     {"node", f.node.empty() ? Json(nullptr) : Json(f.node)},
                     {"site", f.site},
                     {"rows", f.rows},
                     {"bytes", f.bytes},
                     {"frames", f.frames},
                     {"xxh64", f.xxh64.empty() ? Json(nullptr) : Json(f.xxh64)},
                     {"first", f.first.empty() ? Json(nullptr) : Json(f.first)},
                     {"last", f.last.empty() ? Json(nullptr) : Json(f.last)},
                     {"metrics", file_metrics}});
  }
  out["files"] = files;
  if (m.fetch) {
    out["fetch"] = {{"requests", m.fetch->requests},
                    {"retries", m.fetch->retries},
                    {"splits", m.fetch->splits},
                    {"seconds", m.fetch->seconds}};
  } else {
    out["fetch"] = nullptr;
  }
  return out;
}

}  // namespace

Runner RegisterInspect(CLI::App* app) {
  struct Args {
    std::string dir;
    bool verify = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "inspect",
      "Summarise an archive: state, window, nodes, metrics, rows, size; --verify "
      "checks every file and row (exit 1 naming any damage)");
  command->add_option("dir", args->dir, "Archive directory")->required();
  command->add_flag("--verify", args->verify,
                    "Check every file (size, XXH64, zstd frames and checksums, every row, row "
                    "counts); exit 1 if anything is damaged or the archive is incomplete");
  command->add_flag("--json", args->json, "The summary (and verification) as JSON");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    Result<archive::Manifest> manifest = archive::ReadManifest(args->dir);
    if (!manifest.ok()) {
      std::fprintf(stderr, "kwatt inspect: %s\n", manifest.status().message().c_str());
      return ExitCodeOf(manifest.status());
    }
    archive::VerifyReport report;
    Status verified;
    if (args->verify) verified = archive::VerifyArchive(args->dir, &report);
    // Damage (Corruption) is a result to print; anything else stopped the verification.
    if (!verified.ok() && verified.code() != Status::Code::kCorruption) {
      std::fprintf(stderr, "kwatt inspect: %s\n", verified.message().c_str());
      return ExitCodeOf(verified);
    }
    const bool intact = verified.ok();
    int code = kExitOk;
    if (args->verify && (!intact || !manifest->complete)) code = kExitFailure;

    if (args->json) {
      nlohmann::ordered_json out = ToJson(*manifest);
      if (args->verify) {
        out["verify"] = {{"intact", intact},      {"ok", intact && manifest->complete},
                         {"files", report.files}, {"rows", report.rows},
                         {"bytes", report.bytes}, {"problems", report.problems}};
      }
      // The directory, as given, need not be UTF-8: its invalid bytes become U+FFFD.
      std::printf(
          "%s\n",
          out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
      return code;
    }
    PrintText(*manifest);
    if (args->verify) {
      std::printf("\n");
      if (!intact) {
        std::printf("verify     DAMAGED: %zu problem(s):\n", report.problems.size());
        for (const std::string& problem : report.problems) std::printf("  %s\n", problem.c_str());
        std::fflush(stdout);
        std::fprintf(stderr, "kwatt inspect: %s\n", verified.message().c_str());
      } else if (!manifest->complete) {
        std::printf(
            "verify     INTACT BUT INCOMPLETE: %lld files, %lld committed rows, %s "
            "checked; %s\n",
            (long long)report.files, (long long)report.rows, Size(double(report.bytes)).c_str(),
            archive::BeingWritten(manifest->dir)
                ? "a kwatt backup is writing it now: wait for its end"
                : "run the same `kwatt backup` command again to complete it");
      } else {
        std::printf(
            "verify     OK: %lld files, %lld rows, %s: sizes, XXH64, zstd frames and "
            "checksums, every row, rows per file and per metric as recorded\n",
            (long long)report.files, (long long)report.rows, Size(double(report.bytes)).c_str());
      }
    }
    return code;
  };
}

}  // namespace kwatt::cli
