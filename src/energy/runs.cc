// Runs summarized and compared (runs.h): Student's and Welch's t, from Boost.Math.
#include "kwatt/energy/runs.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

namespace kwatt::energy {
namespace {

using Key = std::tuple<std::string, std::string, std::string>;  // scope, name, phase

// Student's t quantile for a two-sided interval at `confidence` with `dof` degrees of freedom.
double TQuantile(double confidence, double dof) {
  boost::math::students_t t(dof);
  return boost::math::quantile(t, 0.5 + confidence / 2);
}

// The figures of each run by key, and the keys in order of first appearance.
struct ByKey {
  std::vector<Key> order;
  std::map<Key, std::vector<const RunFigure*>> figures;

  explicit ByKey(const std::vector<std::vector<RunFigure>>& runs) {
    for (const std::vector<RunFigure>& run : runs) {
      for (const RunFigure& f : run) {
        Key key{f.scope, f.name, f.phase};
        auto [it, added] = figures.try_emplace(key);
        if (added) order.push_back(key);
        it->second.push_back(&f);
      }
    }
  }
};

RunsSummary Summarize(const Key& key, const std::vector<const RunFigure*>& figures,
                      double confidence) {
  RunsSummary s;
  std::tie(s.scope, s.name, s.phase) = key;
  s.runs = int(figures.size());
  for (const RunFigure* f : figures) {
    s.mean += f->joules / s.runs;
    s.mean_seconds += f->seconds / s.runs;
    s.mean_half_width += f->half_width / s.runs;
  }
  if (s.runs < 2) return s;
  double squares = 0;
  for (const RunFigure* f : figures) squares += (f->joules - s.mean) * (f->joules - s.mean);
  s.sd = std::sqrt(squares / (s.runs - 1));
  const double half = TQuantile(confidence, s.runs - 1) * s.sd / std::sqrt(double(s.runs));
  s.low = s.mean - half;
  s.high = s.mean + half;
  return s;
}

std::string Text(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

void Compare(RunsComparison* c, double confidence) {
  const RunsSummary& a = c->a;
  const RunsSummary& b = c->b;
  c->difference = b.mean - a.mean;
  c->relative = a.mean != 0 ? c->difference / a.mean : NAN;
  if (a.runs < 2 || b.runs < 2) {
    c->why = "fewer than two runs in a set: no spread to judge a difference by";
    return;
  }
  const double va = a.sd * a.sd / a.runs, vb = b.sd * b.sd / b.runs;
  const double se = std::sqrt(va + vb);
  if (se == 0) {
    // Identical runs in each set: a difference is exact, or there is none.
    c->low = c->high = c->difference;
    c->significant = c->difference != 0;
    c->p_value = c->significant ? 0 : 1;
    c->why = c->significant ? "every run of each set gave the same energy: the difference is exact"
                            : "every run gave the same energy: no difference";
    return;
  }
  c->dof = (va + vb) * (va + vb) /
           ((va > 0 ? va * va / (a.runs - 1) : 0) + (vb > 0 ? vb * vb / (b.runs - 1) : 0));
  c->t = c->difference / se;
  boost::math::students_t t(c->dof);
  c->p_value = 2 * boost::math::cdf(boost::math::complement(t, std::fabs(c->t)));
  const double half = TQuantile(confidence, c->dof) * se;
  c->low = c->difference - half;
  c->high = c->difference + half;
  c->significant = c->low > 0 || c->high < 0;
  const std::string level = Text("%g %%", 100 * confidence);
  if (c->significant) {
    c->why = std::string("B uses ") + (c->difference > 0 ? "more" : "less") + " energy than A (" +
             Text("%+.2f %%", 100 * c->relative) + ", p = " + Text("%.2g", c->p_value) + "): the " +
             level + " interval of the difference excludes 0";
  } else {
    c->why = "no difference shown at " + level + " (p = " + Text("%.2g", c->p_value) +
             "): the interval of the difference holds 0";
  }
}

}  // namespace

std::vector<RunFigure> RunFiguresOf(const EnergyReport& r) {
  std::vector<RunFigure> out;
  auto add = [&](const char* scope, const std::string& name, const std::string& phase,
                 const Figures& f) {
    if (!f.has_power) return;
    out.push_back({scope, name, phase, f.total_joules(),
                   f.uncertainty(r.clock_offset_seconds).half_width, f.seconds});
  };
  auto add_all = [&](const char* scope, const std::string& name, const Figures& window,
                     const std::vector<Figures>& phases) {
    add(scope, name, "window", window);
    for (size_t p = 0; p < r.phase_names.size() && p < phases.size(); ++p) {
      add(scope, name, r.phase_names[p], phases[p]);
    }
  };
  for (const NodeEnergy& n : r.nodes) {
    if (!n.metric.empty()) add_all("node", n.node, n.window, n.phases);
  }
  for (size_t i = 0; i < r.roles.size(); ++i) {
    add_all("role", r.roles[i].first.name, r.roles[i].second, r.role_phases[i]);
  }
  add_all("total", "total", r.total, r.phase_totals);
  return out;
}

Status CheckConfidence(double confidence, std::string_view name) {
  if (confidence >= 0.5 && confidence <= 0.999) return Status::OK();
  return Status::InvalidArgument(std::string(name) +
                                 " should be a confidence level from 0.5 to 0.999 (0.95: 95 %), "
                                 "not " +
                                 Text("%g", confidence));
}

std::vector<RunsSummary> SummarizeRuns(const std::vector<std::vector<RunFigure>>& runs,
                                       double confidence) {
  ByKey by_key(runs);
  std::vector<RunsSummary> out;
  for (const Key& key : by_key.order) {
    out.push_back(Summarize(key, by_key.figures[key], confidence));
  }
  return out;
}

std::vector<RunsComparison> CompareRuns(const std::vector<std::vector<RunFigure>>& a,
                                        const std::vector<std::vector<RunFigure>>& b,
                                        double confidence) {
  ByKey in_a(a), in_b(b);
  std::vector<RunsComparison> out;
  for (const Key& key : in_a.order) {
    auto other = in_b.figures.find(key);
    if (other == in_b.figures.end()) continue;
    RunsComparison c;
    std::tie(c.scope, c.name, c.phase) = key;
    c.a = Summarize(key, in_a.figures[key], confidence);
    c.b = Summarize(key, other->second, confidence);
    Compare(&c, confidence);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace kwatt::energy
