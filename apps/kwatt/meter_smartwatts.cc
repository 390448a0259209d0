// `kwatt meter smartwatts`: the smartwatts formula (kwatt/meter/powerapi/hwpc_smartwatts.h) on
// hwpc-sensor's reports, post-mortem (a CSV directory or a JSON file, read to the end) or live
// (listening for hwpc-sensor's socket output until SIGINT or SIGTERM), written in PowerAPI's
// formats.

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/core/text.h"
#include "kwatt/core/version.h"
#include "kwatt/meter/outputs/outputs.h"
#include "kwatt/meter/pipeline/fan_out.h"
#include "kwatt/meter/powerapi/hwpc.h"
#include "kwatt/meter/powerapi/hwpc_smartwatts.h"
#include "kwatt/meter/powerapi/powerapi_reports.h"

namespace kwatt::cli {

namespace {

struct SmartWattsArgs {
  std::string input;
  std::vector<std::string> outputs;
  SmartWattsModelArgs model;
  bool no_scaling = false, quiet = false;
};

int Run(SmartWattsArgs& args) {
  const char* kName = "kwatt meter smartwatts";
  auto fail = [&](const Status& status) {
    std::fprintf(stderr, "%s: %s\n", kName, status.message().c_str());
    return ExitCodeOf(status);
  };
  // Everything that can be wrong in the configuration, before anything opens.
  meter::SmartWattsOptions& options = args.model.options;
  options.scale_multiplexing = !args.no_scaling;
  Status valid = ResolveSmartWattsModelOptions(&args.model);
  if (!valid.ok()) return fail(valid);
  size_t colon = args.input.find(':');
  std::string kind = args.input.substr(0, colon);
  std::string where = colon == std::string::npos ? "" : args.input.substr(colon + 1);
  if (where.empty() || (kind != "csv" && kind != "json" && kind != "listen")) {
    return fail(Status::InvalidArgument("--input " + args.input +
                                        ": csv:DIR, json:FILE (- for stdin) or listen:HOST:PORT"));
  }
  const bool live = kind == "listen";
  if (args.outputs.empty()) {
    return fail(
        Status::InvalidArgument("no output: give -o powerapi-csv:DIR, -o powerapi-json:FILE, "
                                "-o jsonl:FILE... (kwatt meter's outputs, doc/meter/outputs.md)"));
  }
  // Every output is checked before the input is opened; files are made when the formula begins
  // (a wrong input truncates nothing).
  std::vector<meter::MeterOutput> outputs;
  meter::OutputOptions output_options;
  output_options.flush_each_report = live;
  output_options.kwatt_version = KwattVersion();
  for (const std::string& spec : args.outputs) {
    Result<std::unique_ptr<meter::OutputSink>> out = meter::OpenOutput(spec, output_options);
    if (!out.ok()) return fail(out.status());
    std::string name = (*out)->Name();
    outputs.push_back(meter::MeterOutput{std::move(name), std::move(*out)});
  }
  // The meter's fan-out, each output on its own thread: reports read from a file wait for room
  // rather than be lost; live, as the meter, nothing waits for an output (what a full queue
  // cannot take is lost for that output, counted). An output failing is said once (from any
  // output's thread); the summary counts what it lost.
  meter::FanOutOptions fan_out;
  fan_out.wait_when_full = !live;
  struct Said {
    std::mutex mutex;
    std::set<std::string> causes;
  };
  fan_out.log = [kName, said = std::make_shared<Said>()](const std::string& cause,
                                                         const std::string& line) {
    std::lock_guard lock(said->mutex);
    if (!said->causes.insert(cause).second) return;
    std::fprintf(stderr, "%s: %s\n", kName, ForTerminal(line).c_str());
  };
  meter::ReportFanOut sink(std::move(outputs), std::move(fan_out));

  std::unique_ptr<meter::HwpcReader> reader;
  meter::HwpcSocketReader* listener = nullptr;
  if (kind == "csv") {
    auto opened = meter::OpenHwpcCsvDirectory(where);
    if (!opened.ok()) return fail(opened.status());
    reader = std::move(*opened);
  } else if (kind == "json") {
    auto opened = meter::OpenHwpcJsonFile(where);
    if (!opened.ok()) return fail(opened.status());
    reader = std::move(*opened);
  } else {
    size_t port_colon = where.rfind(':');
    int port = -1;
    if (port_colon != std::string::npos) {
      try {
        port = std::stoi(where.substr(port_colon + 1));
      } catch (...) {
        port = -1;
      }
    }
    if (port_colon == std::string::npos || port < 0) {
      return fail(Status::InvalidArgument("--input listen:HOST:PORT, not listen:" + where));
    }
    auto opened = meter::HwpcSocketReader::Listen(where.substr(0, port_colon), port);
    if (!opened.ok()) return fail(opened.status());
    listener = opened->get();
    reader = std::move(*opened);
  }
  Result<std::unique_ptr<meter::HwpcSmartWatts>> formula =
      meter::HwpcSmartWatts::Create(options, &sink);
  if (!formula.ok()) return fail(formula.status());

  std::optional<StopSignals> stop;
  if (listener) {
    stop.emplace(StopSignals::How::kCatch);
    stop->OnStop(
        [](void* context) {
          // Async-signal-safe: one write(2).
          static_cast<meter::HwpcSocketReader*>(context)->RequestStop();
        },
        listener);
    std::fprintf(stderr, "%s: listening on %s:%d\n", kName,
                 where.substr(0, where.rfind(':')).c_str(), listener->port());
    std::fflush(stderr);
  }

  Status status;
  meter::HwpcReport report;
  while (true) {
    Result<bool> more = reader->Next(&report);
    if (!more.ok()) {
      status = more.status();
      break;
    }
    if (!*more) break;
    status = (*formula)->Add(std::move(report));
    if (!status.ok()) break;
  }
  // Whatever happened, every tick received is processed and every output flushed.
  Status finished = (*formula)->Finish();
  if (stop) stop->OnStop(nullptr, nullptr);  // the listener is done with
  if (status.ok()) status = finished;
  const meter::SmartWattsStats& stats = (*formula)->stats();
  if (!args.quiet) {
    std::fprintf(stderr,
                 "%s: %" PRId64 " reports, %" PRId64 " ticks, %" PRId64 " models learned, %" PRId64
                 " late reports dropped, %" PRId64 " ticks without \"all\"\n",
                 kName, stats.reports, stats.ticks, stats.models_learned, stats.late_reports,
                 stats.ticks_without_all);
    if (listener && listener->malformed_documents() > 0) {
      std::fprintf(stderr, "%s: %" PRId64 " malformed documents skipped; the last: %s\n", kName,
                   listener->malformed_documents(), listener->last_error().c_str());
    }
  }
  for (const auto& [name, lost] : sink.Dropped()) {
    if (lost == 0) continue;
    std::fprintf(stderr, "%s: output %s lost %" PRId64 " of %" PRId64 " reports\n", kName,
                 name.c_str(), lost, stats.ticks);
  }
  if (!status.ok()) return fail(status);
  return kExitOk;
}

}  // namespace

void AddSmartWattsModelOptions(CLI::App* c, SmartWattsModelArgs* args) {
  meter::SmartWattsOptions& o = args->options;
  c->add_option("--cpu-error-threshold", o.cpu_error_threshold_watts,
                "Relearn when the model's error passes this (watts)")
      ->capture_default_str();
  c->add_option("--dram-error-threshold", o.dram_error_threshold_watts, "The same for DRAM")
      ->capture_default_str();
  c->add_option("--learn-min-samples-required", o.min_samples, "Samples before a first model")
      ->capture_default_str();
  c->add_option("--learn-history-window-size", o.history_window,
                "Samples a model is learned on (the last ones of its layer)")
      ->capture_default_str();
  c->add_option("--learn-error-window-size", o.error_window, "Ticks the error is taken over")
      ->capture_default_str();
  c->add_option("--learn-error-window-method", args->error_method, "median or mean")
      ->capture_default_str();
  c->add_option("--cpu-base-freq", o.cpu_base_frequency_mhz,
                "Base frequency (MHz): what MPERF counts at")
      ->capture_default_str();
  c->add_option("--cpu-base-clock", o.layer_step_mhz, "Frequency layers' step (MHz)")
      ->capture_default_str();
  c->add_option("--cpu-tdp", o.cpu_tdp_watts, "A model whose intercept is not below is refused")
      ->capture_default_str();
  c->add_flag("--disable-cpu-formula", args->disable_cpu, "No package domains");
  c->add_flag("--disable-dram-formula", args->disable_dram, "No DRAM domains");
}

Status ResolveSmartWattsModelOptions(SmartWattsModelArgs* args) {
  meter::SmartWattsOptions& options = args->options;
  options.cpu_formula = !args->disable_cpu;
  options.dram_formula = !args->disable_dram;
  if (args->error_method == "median") {
    options.error_aggregate = meter::ErrorAggregate::kMedian;
  } else if (args->error_method == "mean") {
    options.error_aggregate = meter::ErrorAggregate::kMean;
  } else {
    return Status::InvalidArgument("--learn-error-window-method: median or mean, not \"" +
                                   args->error_method + "\"");
  }
  return meter::ValidateSmartWattsOptions(options).WithContext("options");
}

Runner RegisterMeterSmartwatts(CLI::App* meter) {
  auto args = std::make_shared<SmartWattsArgs>();
  meter::SmartWattsOptions& o = args->model.options;
  CLI::App* c = meter->add_subcommand(
      "smartwatts",
      "The smartwatts formula on hwpc-sensor's reports: a self-calibrating model of RAPL power "
      "on hardware counters, per socket and frequency layer (doc/meter/attribution.md)");
  c->add_option("--input", args->input,
                "csv:DIR (hwpc-sensor's CSV output), json:FILE (JSON documents, - for stdin), or "
                "listen:HOST:PORT (hwpc-sensor's socket output connects there; runs until "
                "SIGINT/SIGTERM)")
      ->required();
  c->add_option("-o,--output", args->outputs,
                "powerapi-csv:DIR, powerapi-json:FILE, powerapi-formula-json:FILE, and every "
                "output of kwatt meter: csv:, jsonl:, influxdb:, kwollect:, textfile:, archive: "
                "(repeatable)");
  AddSmartWattsModelOptions(c, &args->model);
  c->add_option("--sensor-reports-frequency", o.sensor_period_ms,
                "The sensor's period (ms): the first tick's length")
      ->capture_default_str();
  c->add_option("--cpu-rapl-ref-event", o.cpu_rapl_event, "RAPL event of the CPU formula")
      ->capture_default_str();
  c->add_option("--dram-rapl-ref-event", o.dram_rapl_event, "RAPL event of the DRAM formula")
      ->capture_default_str();
  c->add_option("--reorder-ticks", o.reorder_ticks,
                "Ticks held for late reports before the oldest is processed")
      ->capture_default_str();
  c->add_flag("--no-multiplexing-scaling", args->no_scaling,
              "Counts as read, not scaled by time_enabled / time_running (as SmartWatts)");
  c->add_flag("-q,--quiet", args->quiet, "No summary on stderr");
  return [c, args]() -> int {
    if (!c->parsed()) return -1;
    return Run(*args);
  };
}

}  // namespace kwatt::cli
