#include "kwatt/jobs/job.h"

#include <algorithm>

namespace kwatt::jobs {

UnixNanos Job::EffectiveEnd() const {
  if (stopped_at) return *stopped_at;
  return started_at + walltime_s * kNanosPerSecond;
}

bool Job::HasNode(std::string_view uid) const {
  return std::find(nodes.begin(), nodes.end(), uid) != nodes.end();
}

std::optional<JobNodeName> SplitJobNodeName(std::string_view text) {
  size_t dot = text.find('.');
  JobNodeName name;
  name.uid = std::string(text.substr(0, dot));
  std::string_view rest = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (!rest.empty() && rest.back() == '.') rest.remove_suffix(1);  // a rooted FQDN
  constexpr std::string_view kDomain = ".grid5000.fr";
  if (rest.size() > kDomain.size() && rest.ends_with(kDomain)) {
    rest.remove_suffix(kDomain.size());
  }
  if (name.uid.empty() ||
      (dot != std::string_view::npos && (rest.empty() || rest.find('.') != rest.npos))) {
    return std::nullopt;
  }
  name.site = std::string(rest);
  return name;
}

}  // namespace kwatt::jobs
