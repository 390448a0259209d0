#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "apps/kwatt/commands.h"
#include "kwatt/core/text.h"
#include "kwatt/store/open_store.h"

namespace kwatt::cli {

int ExitCodeOf(const Status& status) {
  if (status.ok()) return kExitOk;
  return status.code() == Status::Code::kInvalidArgument ? kExitUsage : kExitFailure;
}

CLI::Validator NonEmptyPath() {
  return CLI::Validator(
      [](std::string& value) {
        return value.empty() ? std::string("is empty: give a path") : std::string();
      },
      "PATH", "NonEmptyPath");
}

CLI::Validator NumberIn(double low, double high, bool integer) {
  auto shown = [](double x) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.15g", x);
    return std::string(text);
  };
  std::string range = shown(low) + " to " + shown(high);
  return CLI::Validator(
      [=](std::string& value) {
        char* end = nullptr;
        errno = 0;
        double number = std::strtod(value.c_str(), &end);
        bool whole = integer ? value.find_first_not_of("0123456789-+") == std::string::npos : true;
        if (value.empty() || *end != '\0' || errno == ERANGE || !whole ||
            !(number >= low && number <= high)) {
          return "'" + value + "' is not " + (integer ? "a whole number" : "a number") + " from " +
                 range;
        }
        return std::string();
      },
      (integer ? "INT in " : "NUMBER in ") + range, "NumberIn");
}

void AddQueryOptions(CLI::App* command, QueryArgs* args) {
  command->add_option("--nodes", args->nodes,
                      "Nodes, comma-separated: nova-1.lyon.grid5000.fr, nova-1-kavlan-4.lyon."
                      "grid5000.fr or nova-1.lyon; several sites allowed");
  command->add_option(
      "--start", args->start,
      "Start (inclusive): epoch seconds, ISO 8601 (local time without offset), now");
  command->add_option("--end", args->end, "End (inclusive), same forms");
  command->add_option(
      "--job", args->job,
      "A job, SITE:ID: its nodes and its window (--nodes, --start, --end narrow it: "
      "bounds outside the job's window are clipped to it)");
  command->add_option("--metrics", args->metrics, "Metric ids, comma-separated (default: all)");
  command->add_flag("--custom-metrics", args->custom_metrics,
                    "--metrics may name custom metrics (pushed with POST), which no catalogue "
                    "lists: they are not checked against the catalogues");
  command->add_flag("--summary", args->summary, "5-minute aggregates instead of raw values");
  command->add_option("--api", args->api,
                      "API base URL (default: uri of ~/.python-grid5000.yaml, else "
                      "https://api.grid5000.fr/stable)");
  command->add_option("--config", args->config,
                      "Credentials file (default ~/.python-grid5000.yaml)");
  command->add_option("--concurrency", args->concurrency, "Requests in flight (default 12)");
  command->add_option("--per-site", args->per_site, "Requests in flight per site (default 3)");
  command->add_option("--rows-per-request", args->rows_per_request,
                      "Row budget of a request (default 50000)");
  command->add_option("--retries", args->retries,
                      "Retries of a request after a transient failure (default 5)");
  command->add_option("--backoff", args->backoff,
                      "Seconds before the first retry, doubled at each (default 0.5)");
}

Status ResolveClientOptions(const QueryArgs& args, kwollect::ClientOptions* options) {
  KWATT_RETURN_IF_ERROR(kwollect::LoadClientOptions(
      args.config.empty() ? kwollect::DefaultConfigPath() : args.config, options));
  if (!args.api.empty()) {
    kwollect::SetApiUrl(args.api, options);
  }
  if (args.concurrency) options->max_concurrency = *args.concurrency;
  if (args.per_site) options->max_per_site = *args.per_site;
  if (args.rows_per_request) options->max_rows_per_request = *args.rows_per_request;
  if (args.retries) options->max_retries = *args.retries;
  if (args.backoff) options->backoff_s = *args.backoff;
  return kwollect::ValidateClientOptions(*options);
}

Status ResolveQuery(const QueryArgs& args, kwollect::FetchQuery* query,
                    kwollect::ClientOptions* options) {
  KWATT_RETURN_IF_ERROR(ResolveClientOptions(args, options));
  UnixNanos now = WallClockNow();
  if (!args.nodes.empty()) {
    Result<std::vector<NodeName>> nodes = ParseNodeList(args.nodes);
    if (!nodes.ok()) return nodes.status().WithContext("--nodes");
    query->nodes = *nodes;
  }
  for (auto [text, slot, name] : {std::tuple{&args.start, &query->start, "--start"},
                                  std::tuple{&args.end, &query->end, "--end"}}) {
    if (text->empty()) continue;
    Result<UnixNanos> t = ParseUserTime(*text, now);
    if (!t.ok()) return t.status().WithContext(name);
    *slot = *t;
  }
  if (!args.job.empty()) {
    size_t colon = args.job.find(':');
    kwollect::JobRef job;
    try {
      size_t used = 0;
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      job.site = args.job.substr(0, colon);
      job.id = std::stoll(args.job.substr(colon + 1), &used);
      if (used != args.job.size() - colon - 1 || job.site.empty()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      return Status::InvalidArgument("--job: expected SITE:ID, e.g. lyon:1234567, not \"" +
                                     args.job + "\"");
    }
    query->job = job;
  } else {
    if (query->nodes.empty()) return Status::InvalidArgument("give --nodes (or --job SITE:ID)");
    if (!query->start || !query->end) {
      return Status::InvalidArgument("give --start and --end (or --job SITE:ID)");
    }
  }
  query->metrics = SplitCommaList(args.metrics);
  query->summary = args.summary;
  query->check_metrics = !args.custom_metrics;
  return Status::OK();
}

int Fail(const char* command, const Status& status) {
  std::fprintf(stderr, "kwatt %s: %s\n", command, ForTerminal(status.message()).c_str());
  return ExitCodeOf(status);
}

Result<double> ParseDuration(const std::string& text, const char* option) {
  double value = 0;
  size_t used = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = used ? text.substr(used) : "";
  double scale = unit.empty() || unit == "s" ? 1
                 : unit == "ms"              ? 1e-3
                 : unit == "m"               ? 60
                 : unit == "h"               ? 3600
                 : unit == "d"               ? 86400
                                             : 0;
  if (!used || scale == 0 || !(value > 0) || !std::isfinite(value)) {
    return Status::InvalidArgument(
        std::string(option) + " '" + text +
        "' should be a positive duration: 90, 90s, 250ms, 10m, 2h or 1d");
  }
  return value * scale;
}

Status ParseListen(const std::string& text, std::string* host, int* port, const char* option) {
  size_t colon = text.rfind(':');
  *host = colon == std::string::npos || colon == 0 ? "127.0.0.1" : text.substr(0, colon);
  std::string port_text = colon == std::string::npos ? text : text.substr(colon + 1);
  // An IPv6 address is written in brackets, as in a URL: [::1]:9120.
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
    if (host->empty() ||
        host->find_first_not_of("0123456789abcdefABCDEF:.%") != std::string::npos ||
        host->find(':') == std::string::npos) {
      return Status::InvalidArgument(
          std::string(option) + " '" + text +
          "': what is in brackets should be an IPv6 address: [::1]:PORT");
    }
  } else if (host->find_first_of(":[]") != std::string::npos) {
    return Status::InvalidArgument(std::string(option) + " '" + text +
                                   "': write an IPv6 address in brackets, [::1]:PORT");
  }
  try {
    size_t used = 0;
    *port = std::stoi(port_text, &used);
    if (used == port_text.size() && *port >= 0 && *port <= 65535) return Status::OK();
  } catch (const std::exception&) {
  }
  return Status::InvalidArgument(std::string(option) + " '" + text +
                                 "' should be HOST:PORT (port 0: any free)");
}

Result<std::map<std::string, double>> ParseIdlePower(const std::vector<std::string>& given) {
  std::map<std::string, double> watts;
  for (const std::string& list : given) {
    for (const std::string& item : SplitCommaList(list)) {
      size_t eq = item.find('=');
      char* end = nullptr;
      double value = eq == std::string::npos ? NAN : std::strtod(item.c_str() + eq + 1, &end);
      if (eq == 0 || eq == std::string::npos || !end || *end != '\0' || !(value >= 0)) {
        return Status::InvalidArgument("--idle-power '" + item +
                                       "' should be DOMAIN=WATTS: package=12.5, dram-0=2");
      }
      watts[item.substr(0, eq)] = value;
    }
  }
  return watts;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

ProgressCallback MakeProgress(const std::string& verb, bool quiet) {
  if (quiet || !isatty(STDERR_FILENO)) return {};
  return [verb](const RowsProgress& p) {
    double rate = p.seconds > 0 ? double(p.bytes) / p.seconds : 0;
    std::string eta = "?";
    if (p.requests_done > 0 && p.requests_done < p.requests_total) {
      eta = std::to_string(int(p.seconds * double(p.requests_total - p.requests_done) /
                                   double(p.requests_done) +
                               0.5)) +
            " s";
    } else if (p.requests_done >= p.requests_total) {
      eta = "0 s";
    }
    std::fprintf(stderr, "\r\033[K%s: %lld/%lld requests, %lld rows, %s, %s/s, ETA %s",
                 verb.c_str(), (long long)p.requests_done, (long long)p.requests_total,
                 (long long)p.rows, HumanBytes(double(p.bytes)).c_str(), HumanBytes(rate).c_str(),
                 eta.c_str());
    if (p.requests_done >= p.requests_total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
    return Status::OK();
  };
}

void PrintFailures(const char* command, const RowsReport& report) {
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
    return out;
  };
  for (const MissingPiece& failure : report.failures) {
    std::string metrics = failure.metrics.empty() ? "" : ", metrics " + join(failure.metrics);
    std::fprintf(stderr, "%s: NOT FETCHED: site %s, nodes %s, %s .. %s%s: %s\n", command,
                 failure.site.c_str(), join(failure.nodes).c_str(),
                 FormatUtcTimestamp(failure.start).c_str(), FormatUtcTimestamp(failure.end).c_str(),
                 metrics.c_str(), failure.error.message().c_str());
  }
}

}  // namespace kwatt::cli
