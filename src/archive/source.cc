#include "kwatt/archive/source.h"

#include <algorithm>
#include <memory>

#include "kwatt/archive/reader.h"

namespace kwatt::archive {

Status FeedArchive(const std::string& dir, const std::vector<std::string>& metrics,
                   std::optional<UnixNanos> start, std::optional<UnixNanos> end,
                   kwollect::RowSink* sink, kwollect::FetchReport* resolved) {
  Result<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (!manifest->complete) {
    return Status::Incomplete(dir +
                              " is an incomplete archive: run the same kwatt backup "
                              "command again to complete it");
  }
  LoadOptions options;
  // Only the metrics the archive holds: asking for one it lacks is not an error here.
  for (const auto& [metric, rows] : manifest->MetricRows()) {
    if (metrics.empty() || std::find(metrics.begin(), metrics.end(), metric) != metrics.end()) {
      options.metrics.push_back(metric);
    }
  }
  *resolved = manifest->Resolved();
  resolved->start = start.value_or(manifest->window_start);
  resolved->end = end.value_or(manifest->window_end);
  KWATT_RETURN_IF_ERROR(sink->Begin(*resolved));
  if (options.metrics.empty()) return Status::OK();  // none of the metrics is in the archive
  options.start = resolved->start;
  options.end = resolved->end;
  options.keep_raw = false;
  Result<std::unique_ptr<ArchiveReader>> reader = ArchiveReader::Open(dir, options);
  if (!reader.ok()) return reader.status();
  RowBatch batch;
  while ((*reader)->Next(&batch)) {
    KWATT_RETURN_IF_ERROR(
        sink->Write((*reader)->current_file().site, batch, (*reader)->interner()));
    resolved->rows += int64_t(batch.size());
  }
  return (*reader)->status();
}

Result<kwollect::FetchReport> FeedSource(const RowSource& source,
                                         const std::vector<std::string>& metrics,
                                         kwollect::RowSink* sink,
                                         const kwollect::ProgressCallback& progress) {
  if (!source.archive_dir.empty()) {
    if (!source.query.nodes.empty() || source.query.job) {
      return Status::InvalidArgument("give an archive or nodes/a job, not both");
    }
    kwollect::FetchReport report;
    KWATT_RETURN_IF_ERROR(FeedArchive(source.archive_dir,
                                      metrics.empty() ? source.query.metrics : metrics,
                                      source.query.start, source.query.end, sink, &report));
    return report;
  }
  kwollect::FetchQuery query = source.query;
  if (!metrics.empty()) query.metrics = metrics;
  return kwollect::Fetch(source.options, query, sink, progress);
}

}  // namespace kwatt::archive
