#include <algorithm>
#include <tuple>

#include "apps/kwatt/commands.h"
#include "kwatt/rows/source.h"

namespace kwatt::cli {

Result<RowsReport> RunSource(const std::string& archive_dir, const QueryArgs& args,
                             const std::vector<std::string>& metrics, RowSink* sink,
                             const ProgressCallback& progress, bool metrics_are_candidates,
                             const std::vector<std::string>& with_archives, int64_t margin) {
  rows::RowSource source;
  source.with_archives = with_archives;
  if (!archive_dir.empty()) {
    if (!args.job.empty()) return Status::InvalidArgument("give an archive or --job, not both");
    source.from = rows::FromArchive{archive_dir};
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
    rows::FromQuery query;
    KWATT_RETURN_IF_ERROR(ResolveQuery(args, &source.query, &query.options));
    source.from = std::move(query);
    source.query.check_metrics = source.query.check_metrics && !metrics_are_candidates;
  }
  source.query.margin = margin;
  return rows::FeedSource(source, metrics, sink, progress);
}

CLI::Option* AddWithArchiveOption(CLI::App* command, std::vector<std::string>* with_archives,
                                  bool several_runs) {
  std::string help =
      "Another archive of the same nodes read with the rows: a kwatt meter recording (-o "
      "archive:) on one of them, whose RAPL and GPU domains are then checked against the node's "
      "wall power (repeatable";
  help += several_runs ? "; each recording goes with the runs it meets)" : ")";
  return command->add_option("--with-archive", *with_archives, help);
}

}  // namespace kwatt::cli
