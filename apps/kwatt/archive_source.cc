#include <tuple>

#include "apps/kwatt/commands.h"
#include "kwatt/backup/row_source.h"

namespace kwatt::cli {

Result<RowsReport> RunSource(const std::string& archive_dir, const QueryArgs& args,
                             const std::vector<std::string>& metrics, RowSink* sink,
                             const ProgressCallback& progress, bool metrics_are_candidates,
                             const std::vector<std::string>& with_archives) {
  backup::RowSource source;
  source.with_archives = with_archives;
  if (!archive_dir.empty()) {
    if (!args.job.empty()) return Status::InvalidArgument("give an archive or --job, not both");
    source.archive_dir = archive_dir;
    if (!args.nodes.empty()) {  // some of the archive's nodes
      Result<std::vector<NodeName>> nodes = ParseNodeList(args.nodes);
      if (!nodes.ok()) return nodes.status().WithContext("--nodes");
      source.query.nodes = *nodes;
    }
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
  return backup::FeedSource(source, metrics, sink, progress);
}

}  // namespace kwatt::cli
