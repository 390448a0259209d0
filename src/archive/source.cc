#include "kwatt/archive/source.h"

#include <algorithm>
#include <memory>

#include "kwatt/archive/reader.h"

namespace kwatt::archive {

Status FeedArchive(const std::string& dir, const std::vector<std::string>& metrics,
                   std::optional<UnixNanos> start, std::optional<UnixNanos> end, RowSink* sink,
                   RowsReport* resolved, const std::vector<NodeName>& nodes) {
  Result<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  if (!manifest->complete) {
    return Status::Incomplete(IncompleteArchiveMessage(*manifest));
  }
  LoadOptions options;
  *resolved = manifest->Resolved();
  if (!nodes.empty()) {  // the archive's rows of these nodes only, each of which it must hold
    std::vector<std::string> held;
    for (const ManifestNode& node : manifest->nodes) held.push_back(node.node);
    std::vector<NodeName> kept;
    for (const NodeName& node : nodes) {
      if (std::find(held.begin(), held.end(), node.Fqdn()) == held.end()) {
        std::string list;
        for (const std::string& fqdn : held) list += (list.empty() ? "" : ", ") + fqdn;
        return Status::InvalidArgument("node " + node.Fqdn() + " is not in archive " + dir +
                                       " (its nodes: " + list + ")");
      }
      if (std::find(kept.begin(), kept.end(), node) == kept.end()) kept.push_back(node);
    }
    resolved->nodes = kept;
    for (const NodeName& node : kept) options.nodes.push_back(node.Fqdn());
  }
  // Only the metrics the archive holds: asking for one it lacks is not an error here.
  for (const auto& [metric, rows] : manifest->MetricRows()) {
    if (metrics.empty() || std::find(metrics.begin(), metrics.end(), metric) != metrics.end()) {
      options.metrics.push_back(metric);
    }
  }
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

}  // namespace kwatt::archive
