// textfile:PATH: the meter's rows for a node exporter's textfile collector, in Kwollect's
// convention kwollect_custom{_metric_id="...",_timestamp="..."} (doc/meter/outputs.md, "Textfile").
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kwatt/core/prometheus_writer.h"
#include "kwatt/core/text.h"
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter::internal {

namespace {

constexpr const char* kFileName = "kwatt_meter.prom";

class TextfileOutput : public SeriesOutput {
 public:
  TextfileOutput(const OutputSpec& spec, const OutputOptions& options, std::string path)
      : SeriesOutput(spec.shown, options), path_(std::move(path)), temporary_(path_ + ".tmp") {}

  Status Finish() override {
    // A stopped meter's last rows would be scraped again and again, as new rows each time.
    if (begun_ && std::remove(path_.c_str()) != 0 && errno != ENOENT) {
      return Status::IOError("cannot remove " + path_ + ": " + std::strerror(errno));
    }
    return Status::OK();
  }

 protected:
  Status BeginSeries(const MeterHeader&) override {
    begun_ = true;
    return Status::OK();
  }

  Status WriteSeries(const IntervalReport& report,
                     const std::vector<SeriesPoint>& points) override {
    KwollectRows(header(), report, points, &rows_);
    std::string text;
    AppendPrometheusFamily(&text, "kwollect_custom", "untyped",
                           "Rows for Kwollect (kwatt meter): the row's metric id is _metric_id, "
                           "its time _timestamp.");
    std::string stamp = FormatEpochSeconds(report.end);
    PrometheusLabels labels;
    for (const MeterRow& row : rows_) {
      labels.assign({{"_metric_id", row.metric}, {"_timestamp", stamp}});
      labels.insert(labels.end(), row.labels.begin(), row.labels.end());
      AppendPrometheusSample(&text, "kwollect_custom", labels,
                             std::isfinite(row.value) ? row.value : 0.0);
    }
    // Whole or not at all: the exporter reads the file while it is being replaced.
    int fd = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError("cannot create " + temporary_ + ": " + std::strerror(errno));
    Status status = WriteAll(fd, text, temporary_);
    if (::close(fd) != 0 && status.ok()) {
      status = Status::IOError("cannot write " + temporary_ + ": " + std::strerror(errno));
    }
    if (status.ok() && std::rename(temporary_.c_str(), path_.c_str()) != 0) {
      status = Status::IOError("cannot rename " + temporary_ + " to " + path_ + ": " +
                               std::strerror(errno));
    }
    if (!status.ok()) {
      std::remove(temporary_.c_str());
      return status;
    }
    int64_t count = int64_t(rows_.size());
    UpdateStats([&](OutputStats& s) { s.rows_written += count; });
    return Status::OK();
  }

 private:
  const std::string path_, temporary_;
  bool begun_ = false;
  std::vector<MeterRow> rows_;
};

}  // namespace

Result<std::unique_ptr<OutputSink>> OpenNodeExporterTextfileOutput(const OutputSpec& spec,
                                                                   const OutputOptions& options) {
  // DIR, or DIR/NAME.prom (the collector reads *.prom files only).
  std::string path = spec.path;
  const std::string suffix = ".prom";
  bool file = path.size() > suffix.size() &&
              path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (file) {
    KWATT_RETURN_IF_ERROR(CheckWritableFile(path, spec.shown));
  } else {
    KWATT_RETURN_IF_ERROR(CheckWritableDirectory(path, spec.shown));
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    path += "/" + std::string(kFileName);
  }
  return std::unique_ptr<OutputSink>(std::make_unique<TextfileOutput>(spec, options, path));
}

}  // namespace kwatt::meter::internal
