#include "transport/kube/kube_session_table.hpp"

#include <algorithm>
#include <utility>

namespace leasehold {

using time_point = session_table::time_point;

void session_table::saw(const lease_key& k, std::optional<lease> rec, time_point now,
                        std::optional<time_point> sent) {
  std::lock_guard<std::mutex> g(mx_);
  auto& r = m_[k];
  auto at = sent.value_or(now);
  if (r.known && at < r.read_sent)
    return;
  r.read_sent = at;
  bool changed = !r.known || r.record.has_value() != rec.has_value()
                 || (rec && r.record->resource_version != rec->resource_version);
  if (changed)
    r.seen_at = now;
  if (!r.known || r.record.has_value() != rec.has_value() || (rec && r.record->spec != rec->spec))
    r.spec_seen_at = now;
  r.known = true;
  r.record = std::move(rec);
  r.read_at = now;
  r.reading = false;
  for (auto i = r.left_at.begin(); i != r.left_at.end();)
    i = i->second + 20 * d_ < now ? r.left_at.erase(i) : std::next(i);
}

session_table::time_point session_table::expires(const lease_key& k, const session_binding& b,
                                                 time_point unknown, time_point since, bool ask) {
  std::lock_guard<std::mutex> g(mx_);
  auto& r = m_[k];
  r.asked = r.asked || ask;
  if (!r.known)
    return unknown;
  if (r.record && in_incarnation(*r.record, b))
    return r.seen_at + d_;
  if (r.record && released_in(*r.record, b))
    return time_point{};
  auto it = r.left_at.find(incarnation_key(b));
  if (it == r.left_at.end()) {
    if (r.read_sent < since)
      return unknown;
    it = r.left_at.emplace(incarnation_key(b), std::max(r.seen_at, since)).first;
  }
  return it->second + d_;
}

time_point session_table::renewed_at(const lease_key& k, const session_binding& b) {
  std::lock_guard<std::mutex> g(mx_);
  auto i = m_.find(k);
  if (i == m_.end() || !i->second.record || !in_incarnation(*i->second.record, b))
    return time_point{};
  return i->second.seen_at;
}

bool session_table::still(const lease_key& k, time_point now) {
  std::lock_guard<std::mutex> g(mx_);
  auto i = m_.find(k);
  return i != m_.end() && i->second.known && i->second.spec_seen_at + d_ <= now;
}

std::optional<lease> session_table::record(const lease_key& k) {
  std::lock_guard<std::mutex> g(mx_);
  auto i = m_.find(k);
  return i == m_.end() ? std::nullopt : i->second.record;
}

std::vector<lease_key> session_table::due(time_point now, caf::timespan every) {
  std::lock_guard<std::mutex> g(mx_);
  std::vector<lease_key> out;
  for (auto& [k, r] : m_) {
    if (std::exchange(r.asked, false))
      r.wanted_until = now + 2 * d_;
    if (now < r.wanted_until && !r.reading && (!r.known || r.read_at + every <= now)) {
      r.reading = true;
      out.push_back(k);
    }
  }
  return out;
}

void session_table::read_failed(const lease_key& k) {
  std::lock_guard<std::mutex> g(mx_);
  m_[k].reading = false;
  m_[k].asked = true;
}

void session_table::set_own(const std::string& ns, std::string inc) {
  std::lock_guard<std::mutex> g(mx_);
  own_[ns] = std::move(inc);
}

bool session_table::own_live(const std::string& ns, const std::string& inc) {
  std::lock_guard<std::mutex> g(mx_);
  auto i = own_.find(ns);
  return i != own_.end() && i->second == inc;
}

namespace {

class session_evidence final : public lease_evidence {
public:
  session_evidence(std::shared_ptr<session_table> t, std::string own, caf::timespan d,
                   caf::timespan retry)
    : t_(std::move(t)), own_(std::move(own)), d_(d), retry_(retry) {}

  time_point expires_at(const lease& rec, time_point observed_at, time_point by_clock) override {
    auto b = binding_of(rec);
    if (!b)
      return by_clock;
    auto own_by_record = observed_at + d_;   // the record's own change is waited out too
    if (b->session == own_ && t_->own_live(rec.ns, incarnation_key(*b)))
      return own_by_record;   // our live session: no elector of ours renews it (else it held it)
    auto s = t_->expires({rec.ns, b->session}, *b, observed_at + std::max(d_, retry_), observed_at);
    return std::max(own_by_record, s);
  }

  void record_changed(const lease& rec) override {
    std::lock_guard<std::mutex> g(mx_);
    ns_ = rec.ns;
    bound_ = binding_of(rec);
  }

  /// The session's last renewal seen, unless it is our own: a follower's
  /// term of ours is held by no elector here, so our rounds do not renew it.
  time_point holder_renewed_at() override {
    std::lock_guard<std::mutex> g(mx_);
    if (!bound_ || bound_->session == own_)
      return {};
    return t_->renewed_at({ns_, bound_->session}, *bound_);
  }

  void before_take(const lease& old, lease& take) override {
    if (auto b = binding_of(old))
      take.session_end = binding_text(*b);
  }

private:
  std::shared_ptr<session_table> t_;
  std::string own_;
  caf::timespan d_, retry_;
  std::mutex mx_;   // the runner reads what the elector last saw
  std::string ns_;
  std::optional<session_binding> bound_;
};

} // namespace

std::shared_ptr<lease_evidence> make_session_evidence(std::shared_ptr<session_table> t,
                                                      std::string own, caf::timespan lease_duration,
                                                      caf::timespan retry_period) {
  return std::make_shared<session_evidence>(std::move(t), std::move(own), lease_duration,
                                            retry_period);
}

} // namespace leasehold
