#include <tuple>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/source.h"

namespace kwatt::cli {

Result<kwollect::FetchReport> RunSource(const std::string& archive_dir, const QueryArgs& args,
                                        const std::vector<std::string>& metrics,
                                        kwollect::RowSink* sink,
                                        const kwollect::ProgressCallback& progress,
                                        bool metrics_are_candidates) {
  archive::RowSource source;
  if (!archive_dir.empty()) {
    if (!args.nodes.empty() || !args.job.empty()) {
      return Status::InvalidArgument("give an archive or --nodes/--job, not both");
    }
    source.archive_dir = archive_dir;
    UnixNanos now = WallClockNow();
    for (auto [text, slot, name] : {std::tuple{&args.start, &source.query.start, "--start"},
                                    std::tuple{&args.end, &source.query.end, "--end"}}) {
      if (text->empty()) continue;
      Result<UnixNanos> t = ParseUserTime(*text, now);
      if (!t.ok()) return t.status().WithContext(name);
      *slot = *t;
    }
  } else {
    KWATT_RETURN_IF_ERROR(ResolveQuery(args, &source.query, &source.options));
    source.query.check_metrics = source.query.check_metrics && !metrics_are_candidates;
  }
  return archive::FeedSource(source, metrics, sink, progress);
}

}  // namespace kwatt::cli
