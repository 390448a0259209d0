// archive:DIR: the rows the meter pushes to Kwollect, kept as a kwatt archive
// (doc/meter/outputs.md, "Archive"; doc/archive_format.md): `kwatt inspect`, `kwatt cat`, `kwatt
// energy` and `kwatt.load` read it as they read a backup.
#include <filesystem>

#include "kwatt/archive/format.h"
#include "kwatt/archive/manifest.h"
#include "kwatt/archive/writer.h"
#include "kwatt/core/row_batch.h"
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter::internal {

namespace {

namespace fs = std::filesystem;

// What an archive's manifest says its query was, for a recording of the meter.

class ArchiveOutput : public SeriesOutput {
 public:
  ArchiveOutput(const OutputSpec& spec, const OutputOptions& options, NodeName node,
                std::optional<UnixNanos> resumed_start)
      : SeriesOutput(spec.shown, options),
        dir_(spec.path),
        node_(std::move(node)),
        resumed_start_(resumed_start) {}

  Status Finish() override {
    if (!writer_) return Status::OK();
    RowsReport report;
    report.nodes = {node_};
    report.start = start_;
    report.end = last_end_ ? last_end_ : start_;
    Status status = writer_->Finish(report);
    writer_.reset();
    return status;
  }

 protected:
  Status BeginSeries(const MeterHeader& header) override {
    archive::BackupQuery query;
    query.api = std::string(archive::kRecordingApi);
    query.nodes = {node_.Fqdn()};
    start_ = resumed_start_ ? *resumed_start_ : header.start;
    query.start = start_;
    archive::WriterOptions writer_options;
    writer_options.recording = true;
    Result<std::unique_ptr<archive::ArchiveWriter>> writer =
        archive::ArchiveWriter::Open(dir_, query, options_.kwatt_version, writer_options);
    if (!writer.ok()) return writer.status().WithContext("output '" + name_ + "'");
    if ((*writer)->already_complete()) {
      return Status::InvalidArgument("output '" + name_ + "': " + dir_ +
                                     " holds a finished recording: give a new directory");
    }
    RowsReport resolved;
    resolved.nodes = {node_};
    resolved.start = start_;
    resolved.end = start_;  // provisional: Finish ends the window with the recording
    KWATT_RETURN_IF_ERROR((*writer)->Begin(resolved));
    writer_ = std::move(*writer);
    return Status::OK();
  }

  Status WriteSeries(const IntervalReport& report,
                     const std::vector<SeriesPoint>& points) override {
    if (!writer_) return Status::Internal(name_ + ": Write before Begin");
    KwollectRows(header(), report, points, &rows_);
    // A fresh interner each time: ids live for one batch, and series come and go.
    StringInterner interner;
    RowBatch batch;
    uint32_t device = interner.Intern(node_.uid);
    int32_t offset = ParisUtcOffsetSeconds(FloorDiv(report.end, kNanosPerSecond));
    for (const MeterRow& row : rows_) {
      batch.time.push_back(report.end);
      batch.utc_offset.push_back(offset);  // as Kwollect serves it: Paris time
      batch.device.push_back(device);
      batch.metric.push_back(interner.Intern(row.metric));
      batch.value.push_back(row.value);
      batch.labels.push_back(interner.Intern(LabelsJson(row.labels)));
    }
    std::string raw;
    std::vector<uint32_t> ends;
    for (size_t i = 0; i < batch.size(); ++i) {
      AppendRowText(&raw, batch, i, interner);
      ends.push_back(uint32_t(raw.size()));
    }
    batch.raw = std::move(raw);
    batch.raw_end = std::move(ends);
    KWATT_RETURN_IF_ERROR(writer_->Write(node_.site, batch, interner));
    last_end_ = std::max(last_end_, report.end);
    int64_t count = int64_t(batch.size());
    UpdateStats([&](OutputStats& s) { s.rows_written += count; });
    return Status::OK();
  }

 private:
  const std::string dir_;
  const NodeName node_;
  const std::optional<UnixNanos> resumed_start_;
  std::unique_ptr<archive::ArchiveWriter> writer_;
  UnixNanos start_ = 0, last_end_ = 0;
  std::vector<MeterRow> rows_;
};

}  // namespace

Result<std::unique_ptr<OutputSink>> OpenArchiveOutput(const OutputSpec& spec,
                                                      const OutputOptions& options) {
  KWATT_ASSIGN_OR_RETURN(NodeIdentity identity,
                         ResolveNode(options, /*need_site=*/false, spec.shown));
  // Off Grid'5000 the archive still names nodes by a Grid'5000 FQDN: NODE.local.grid5000.fr.
  NodeName node{identity.node, identity.site.empty() ? "local" : identity.site};
  std::error_code error;
  std::optional<UnixNanos> resumed_start;
  if (!fs::exists(spec.path, error)) {
    std::string parent = fs::path(spec.path).parent_path().string();
    KWATT_RETURN_IF_ERROR(CheckWritableDirectory(parent.empty() ? "." : parent, spec.shown));
  } else if (fs::exists(fs::path(spec.path) / "manifest.json", error)) {
    // A recording of this node that a stopped meter left incomplete: the meter goes on with it.
    Result<archive::Manifest> manifest = archive::ReadManifest(spec.path);
    if (!manifest.ok()) return manifest.status().WithContext("output '" + spec.shown + "'");
    bool ours = manifest->query.api == archive::kRecordingApi &&
                manifest->query.nodes == std::vector<std::string>{node.Fqdn()};
    if (manifest->complete || !ours) {
      return Status::InvalidArgument(
          "output '" + spec.shown + "': " + spec.path + " holds " +
          (manifest->complete ? "a finished archive" : "another archive") +
          ": give a new directory (a meter goes on only with the unfinished recording of the "
          "node " +
          node.Fqdn() + ")");
    }
    Result<UnixNanos> start = ParseKwollectTimeParameter(manifest->query.start);
    if (!start.ok()) return start.status().WithContext("output '" + spec.shown + "'");
    resumed_start = *start;
    KWATT_RETURN_IF_ERROR(CheckWritableDirectory(spec.path, spec.shown));
  } else {
    KWATT_RETURN_IF_ERROR(CheckWritableDirectory(spec.path, spec.shown));
    if (!fs::is_empty(spec.path, error)) {
      return Status::InvalidArgument("output '" + spec.shown + "': " + spec.path +
                                     " is not empty and holds no archive: give a new or empty "
                                     "directory");
    }
  }
  return std::unique_ptr<OutputSink>(
      std::make_unique<ArchiveOutput>(spec, options, std::move(node), resumed_start));
}

}  // namespace kwatt::meter::internal
