// PowerAPI's report formats (kwatt/meter/powerapi/powerapi_reports.h) as an output of OpenOutput.
#include <mutex>

#include "kwatt/meter/powerapi/powerapi_reports.h"
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter::internal {

namespace {

// PowerAPI's report formats (powerapi_reports.h) as an output: opened at Begin, as every output
// makes its files when the meter starts, and checked before.
class PowerApiOutput : public OutputSink {
 public:
  explicit PowerApiOutput(OutputSpec spec, bool flush_each_report) : spec_(std::move(spec)) {
    options_.flush_each_report = flush_each_report;
  }
  Status Begin(const MeterHeader& header) override {
    Result<std::unique_ptr<ReportSink>> sink =
        spec_.kind == OutputKind::kPowerApiCsv
            ? OpenPowerApiCsvSink(spec_.path, options_)
            : OpenPowerApiJsonSink(spec_.path,
                                   spec_.kind == OutputKind::kPowerApiJson
                                       ? PowerApiReportType::kPower
                                       : PowerApiReportType::kFormula,
                                   options_);
    if (!sink.ok()) return sink.status().WithContext("output " + spec_.shown);
    sink_ = std::move(*sink);
    return sink_->Begin(header);
  }
  Status Write(const IntervalReport& report) override {
    if (!sink_) return Status::Internal("output " + spec_.shown + " written before Begin");
    Status written = sink_->Write(report);
    std::lock_guard lock(mutex_);
    if (written.ok()) {
      ++stats_.reports;
    } else {
      stats_.last_error = written.message();
    }
    return written;
  }
  Status Finish() override { return sink_ ? sink_->Finish() : Status::OK(); }
  std::string Name() const override { return spec_.shown; }
  OutputStats Stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  OutputSpec spec_;
  PowerApiSinkOptions options_;
  std::unique_ptr<ReportSink> sink_;
  mutable std::mutex mutex_;
  OutputStats stats_;
};

}  // namespace

Result<std::unique_ptr<OutputSink>> OpenPowerApiOutput(const OutputSpec& spec,
                                                       const OutputOptions& options) {
  // powerapi-csv's directory is made at Begin (its parents too), as PowerAPI does; the JSON
  // formats' file is checked now, as every output's.
  if (spec.kind != OutputKind::kPowerApiCsv && spec.path != "-") {
    KWATT_RETURN_IF_ERROR(CheckWritableFile(spec.path, spec.shown));
  }
  return std::unique_ptr<OutputSink>(
      std::make_unique<PowerApiOutput>(spec, options.flush_each_report));
}

}  // namespace kwatt::meter::internal
