#include "kwatt/backup/row_source.h"

#include "kwatt/archive/source.h"

namespace kwatt::backup {

Result<RowsReport> FeedSource(const RowSource& source, const std::vector<std::string>& metrics,
                              RowSink* sink, const ProgressCallback& progress) {
  if (!source.archive_dir.empty()) {
    if (source.query.job) return Status::InvalidArgument("give an archive or a job, not both");
    RowsReport report;
    KWATT_RETURN_IF_ERROR(archive::FeedArchive(
        source.archive_dir, metrics.empty() ? source.query.metrics : metrics, source.query.start,
        source.query.end, sink, &report, source.query.nodes));
    return report;
  }
  kwollect::FetchQuery query = source.query;
  if (!metrics.empty()) query.metrics = metrics;
  return kwollect::Fetch(source.options, query, sink, progress);
}

}  // namespace kwatt::backup
