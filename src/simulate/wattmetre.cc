#include "kwatt/simulate/wattmetre.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

namespace kwatt::simulate {

using nlohmann::ordered_json;

namespace {

// Writes `value` with 3 decimals, rounded half away from zero (as printf, but without its
// locale and cost). Returns the characters written (at most 24).
size_t FormatMilli(double value, char* out) {
  if (!std::isfinite(value) || std::fabs(value) >= 9e15) {
    return size_t(std::snprintf(out, 32, "%.3f", value));
  }
  char* p = out;
  int64_t milli = std::llround(value * 1000);
  if (milli < 0) {
    *p++ = '-';
    milli = -milli;
  }
  char digits[24];
  int n = 0;
  int64_t whole = milli / 1000;
  do {
    digits[n++] = char('0' + whole % 10);
    whole /= 10;
  } while (whole);
  while (n) *p++ = digits[--n];
  int64_t fraction = milli % 1000;
  *p++ = '.';
  *p++ = char('0' + fraction / 100);
  *p++ = char('0' + fraction / 10 % 10);
  *p++ = char('0' + fraction % 10);
  return size_t(p - out);
}

// "1700000000.020000" (6 decimals when the period is whole microseconds, else 9).
size_t FormatEpoch(UnixNanos t, bool micro, char* out) {
  int64_t seconds = FloorDiv(t, kNanosPerSecond);
  int64_t nanos = NanosOfSecond(t);
  if (micro) {
    return size_t(std::snprintf(out, 40, "%" PRId64 ".%06" PRId64, seconds, nanos / 1000));
  }
  return size_t(std::snprintf(out, 40, "%" PRId64 ".%09" PRId64, seconds, nanos));
}

}  // namespace

SimulatedWattmetre::SimulatedWattmetre(SimulatedWattmetreOptions options)
    : options_(std::move(options)) {
  period_ = int64_t(std::llround(1e9 / options_.rate));
  first_ = CeilDiv(options_.start, period_) * period_;
  micro_ = period_ % kNanosPerMicro == 0;
}

SimulatedWattmetre::~SimulatedWattmetre() = default;

Result<std::unique_ptr<SimulatedWattmetre>> SimulatedWattmetre::Create(
    SimulatedWattmetreOptions options) {
  auto wattmetre = std::unique_ptr<SimulatedWattmetre>(new SimulatedWattmetre(std::move(options)));
  Testbed::Options testbed_options;
  testbed_options.seed = wattmetre->options_.seed;
  KWATT_ASSIGN_OR_RETURN(wattmetre->testbed_,
                         Testbed::Build(testbed_options, wattmetre->options_.jobs));
  return wattmetre;
}

Result<size_t> SimulatedWattmetre::AddNode(const std::string& uid, const std::string& site) {
  if (uid.empty()) return Status::InvalidArgument("an empty node name");
  Node node;
  node.uid = uid;
  for (const auto& s : testbed_->sites()) {
    if (!site.empty() && s->uid != site) continue;
    if (const simulate::Node* found = testbed_->FindNode(*s, uid)) {
      node.model = found->model.get();
      break;
    }
  }
  if (!node.model) {
    size_t dash = uid.rfind('-');
    std::string cluster = dash == std::string::npos ? uid : uid.substr(0, dash);
    node.own =
        std::make_unique<NodeModel>(uid, HardwareOfCluster(cluster),
                                    LoadProfile::ForNode(site, uid, options_.jobs), options_.seed);
    node.model = node.own.get();
  }
  nodes_.push_back(std::move(node));
  node_watts_.resize(nodes_.size());
  return nodes_.size() - 1;
}

void SimulatedWattmetre::AddPort(size_t node) {
  nodes_[node].ports.push_back(ports_.size());
  ports_.push_back(Port{node, 0});
  const double share = 1.0 / double(nodes_[node].ports.size());
  for (size_t port : nodes_[node].ports) ports_[port].share = share;
}

std::string SimulatedWattmetre::PortName(size_t port) const {
  return options_.id + "-port" + std::to_string(port);
}

std::string SimulatedWattmetre::MappingYaml() const {
  std::string text = "# " + options_.id + "'s ports (kwatt simulate wattmetre)\n";
  for (const Node& node : nodes_) {
    text += node.uid + ": [";
    for (size_t i = 0; i < node.ports.size(); ++i) {
      text += (i ? ", " : "") + PortName(node.ports[i]);
    }
    text += "]\n";
  }
  return text;
}

void SimulatedWattmetre::AppendLine(int64_t k, std::string* line) {
  const UnixNanos t = first_ + k * period_;
  const UnixNanos end = t + period_;
  const double period_s = double(period_) / 1e9;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    node_watts_[n] = nodes_[n].model->EnergyJoules(t, end) / period_s;
  }
  char text[48];
  size_t length = FormatEpoch(t, micro_, text);
  if (options_.version == 2) {
    *line += "#activepow0,";
    *line += std::to_string(k % 1000000);
    *line += ',';
    line->append(text, length);
    *line += ",OK";
    for (const Port& port : ports_) {
      *line += ',';
      line->append(text, FormatMilli(node_watts_[port.node] * port.share, text));
    }
  } else {
    line->append(text, length);
    *line += ",true,230.000,50.000,";
    *line += std::to_string(k % 1000000);
    *line += ",0";
    for (const Port& port : ports_) {
      double watts = node_watts_[port.node] * port.share;
      *line += ',';
      line->append(text, FormatMilli(watts, text));
      *line += ',';
      line->append(text, FormatMilli(watts / 230.0, text));  // the current, amperes
    }
    *line += ",0,0,0,0,0";
  }
  *line += '\n';
}

std::string SimulatedWattmetre::TruthJson(int64_t samples) const {
  UnixNanos last_end = first_ + samples * period_;
  ordered_json truth;
  truth["wattmetre"] = options_.id;
  truth["version"] = options_.version;
  truth["rate_hz"] = options_.rate;
  truth["period_ns"] = period_;
  truth["samples"] = samples;
  truth["start"] = FormatUtcTimestamp(first_);
  truth["end"] = FormatUtcTimestamp(last_end);
  truth["start_ns"] = first_;
  truth["end_ns"] = last_end;
  truth["seconds"] = double(last_end - first_) / 1e9;
  ordered_json port_json = ordered_json::object();
  std::vector<double> node_joules(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    node_joules[n] = samples ? nodes_[n].model->EnergyJoules(first_, last_end) : 0.0;
  }
  for (size_t i = 0; i < ports_.size(); ++i) {
    port_json[PortName(i)] = {{"node", nodes_[ports_[i].node].uid},
                              {"joules", node_joules[ports_[i].node] * ports_[i].share}};
  }
  ordered_json node_json = ordered_json::object();
  for (size_t n = 0; n < nodes_.size(); ++n) {
    ordered_json names = ordered_json::array();
    for (size_t p : nodes_[n].ports) names.push_back(PortName(p));
    node_json[nodes_[n].uid] = {{"joules", node_joules[n]}, {"ports", names}};
  }
  truth["ports"] = std::move(port_json);
  truth["nodes"] = std::move(node_json);
  return truth.dump(2) + "\n";
}

}  // namespace kwatt::simulate
