#include <algorithm>
#include <chrono>
#include <tuple>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"

namespace kwatt::cli {

Status FeedArchive(const std::string& dir, const std::vector<std::string>& metrics,
                   std::optional<UnixNanos> start, std::optional<UnixNanos> end,
                   kwollect::RowSink* sink, kwollect::FetchReport* resolved) {
  Result<archive::Manifest> manifest = archive::ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (!manifest->complete) {
    return Status::Incomplete(dir + " is an incomplete archive: run the same kwatt backup "
                                    "command again to complete it");
  }
  archive::LoadOptions options;
  // Only the metrics the archive holds: asking for one it lacks is not an error here.
  for (const auto& [metric, rows] : manifest->MetricRows()) {
    if (metrics.empty() || std::find(metrics.begin(), metrics.end(), metric) != metrics.end()) {
      options.metrics.push_back(metric);
    }
  }
  resolved->start = start.value_or(manifest->window_start);
  resolved->end = end.value_or(manifest->window_end);
  resolved->job_types = manifest->job_types;
  resolved->catalogues = manifest->catalogue;
  resolved->nodes.clear();
  for (const archive::ManifestNode& node : manifest->nodes) {
    resolved->nodes.push_back(kwollect::NodeName{node.uid, node.site});
  }
  KWATT_RETURN_IF_ERROR(sink->Begin(*resolved));
  if (options.metrics.empty()) return Status::OK();  // none of the metrics is in the archive
  options.start = resolved->start;
  options.end = resolved->end;
  options.keep_raw = false;
  Result<std::unique_ptr<archive::ArchiveReader>> reader =
      archive::ArchiveReader::Open(dir, options);
  if (!reader.ok()) return reader.status();
  RowBatch batch;
  while ((*reader)->Next(&batch)) {
    KWATT_RETURN_IF_ERROR(
        sink->Write((*reader)->current_file().site, batch, (*reader)->interner()));
    resolved->rows += int64_t(batch.size());
  }
  return (*reader)->status();
}

}  // namespace kwatt::cli

namespace kwatt::cli {

Result<kwollect::FetchReport> RunSource(const std::string& archive_dir, const QueryArgs& args,
                                        const std::vector<std::string>& metrics,
                                        kwollect::RowSink* sink,
                                        const kwollect::ProgressCallback& progress) {
  if (!archive_dir.empty()) {
    if (!args.nodes.empty() || !args.job.empty()) {
      return Status::InvalidArgument("give an archive or --nodes/--job, not both");
    }
    UnixNanos now = WallClockNow();
    std::optional<UnixNanos> start, end;
    for (auto [text, slot, name] : {std::tuple{&args.start, &start, "--start"},
                                    std::tuple{&args.end, &end, "--end"}}) {
      if (text->empty()) continue;
      Result<UnixNanos> t = ParseUserTime(*text, now);
      if (!t.ok()) return t.status().WithContext(name);
      *slot = *t;
    }
    kwollect::FetchReport report;
    KWATT_RETURN_IF_ERROR(FeedArchive(archive_dir, metrics, start, end, sink, &report));
    return report;
  }
  kwollect::FetchQuery query;
  kwollect::ClientOptions options;
  KWATT_RETURN_IF_ERROR(ResolveQuery(args, &query, &options));
  if (!metrics.empty()) query.metrics = metrics;
  return kwollect::Fetch(options, query, sink, progress);
}

}  // namespace kwatt::cli
