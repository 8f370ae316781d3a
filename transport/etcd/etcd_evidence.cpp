#include "transport/etcd/etcd_evidence.hpp"

#include <algorithm>

namespace leasehold {

using namespace std::chrono_literals;
using time_point = caf::actor_clock::time_point;

bool ttl_tells_expiry(const election_timings& t, caf::timespan ttl) {
  return t.renew_deadline + t.effective_request_timeout() + 1s <= ttl;
}

namespace {

/// An etcd mod_revision as the transport reports it (resource_version); 0
/// when it is not one.
std::int64_t revision_of(const std::string& rv) {
  if (rv.empty() || rv.size() > 18 || rv.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return std::stoll(rv);
}

} // namespace

vanish_verdict judge_vanished_key(const lease* last, const etcd_key_readings& r, time_point seen_by,
                                  const election_timings& t, caf::timespan ttl, bool gapless,
                                  std::int64_t store_revision) {
  if (last && released_record(last->spec) && store_revision > 0
      && store_revision == revision_of(last->resource_version) + 1)
    return {seen_by, false};
  auto rt = t.effective_request_timeout();
  bool fresh = r.read_at && seen_by <= *r.read_at + 100ms + rt;
  // A stream can be up and still late: the history check needs the revision.
  if (ttl_tells_expiry(t, ttl) && gapless && fresh && r.left == 0 && r.zero_since
      && r.zero_revision > 0)
    return {std::max(seen_by, *r.zero_since + 1s), false, r.zero_revision};
  return {seen_by, true};
}

caf::timespan next_ttl_read(const etcd_key_readings& r, const election_timings& t, time_point now,
                            caf::timespan otherwise, double spread) {
  if (!r.read_at)
    return otherwise;
  // One read lands in the key's last second: docs/safety.md, "Reading the
  // TTL in time".
  caf::timespan after =
    r.left == 0 ? std::clamp<caf::timespan>(t.effective_request_timeout() / 2, 100ms, 1s)
                : std::max<caf::timespan>(100ms, std::chrono::seconds(r.left) - 500ms);
  if (r.left >= 2) {
    auto span = std::min<caf::timespan>(1s, after / 4);
    after -= caf::timespan{static_cast<caf::timespan::rep>(
      std::clamp(spread, 0.0, 1.0) * static_cast<double>(span.count()))};
  }
  return std::min(otherwise, std::max(caf::timespan{0}, *r.read_at + after - now));
}

namespace {

class etcd_evidence final : public lease_evidence {
public:
  etcd_evidence(const election_timings& t, std::uint64_t seed,
                std::shared_ptr<const etcd_shared_readings> shared)
    : t_(t), spread_(draw(seed)), shared_(std::move(shared)) {}

  bool store_ends_terms() const override { return true; }

  void record_changed(const lease&) override {
    forget_readings();   // another record: another key or etcd lease
    outside_wait_until_.reset();
    hold_next_create_ = false;
  }

  /// A (maybe shared) reading counts from sent - ttl_age, no later than its
  /// real send.
  void read_found(const lease* rec, time_point sent, time_point now) override {
    outside_wait_until_.reset();   // the key is there (again)
    hold_next_create_ = false;
    if (!rec || !rec->ttl_seconds)
      return;
    auto left = std::max<std::int64_t>(0, *rec->ttl_seconds);
    if (left != 0)
      r_.zero_since.reset();
    else if (!r_.zero_since || r_.left != 0)
      r_.zero_since = now;   // the reply of the first read of 0
    r_.zero_revision = left == 0 ? rec->read_revision : 0;
    r_.read_at = sent - std::chrono::duration_cast<caf::timespan>(rec->ttl_age);
    r_.left = left;
  }

  void read_failed() override { forget_readings(); }

  /// A keepalive changes no record, so a held key's TTL readings say when
  /// to look (next_wake); an unheld record is waited out as on Kubernetes.
  caf::timespan stream_wait(const view& v, time_point now, time_point expires_at) override {
    if (v.record && !v.record->spec.holder_identity.empty())
      return shares(v) ? t_.lease_duration : t_.lease_duration / 2;
    return lease_evidence::stream_wait(v, now, expires_at);
  }

  caf::timespan next_wake(const view& v, time_point now, caf::timespan d) override {
    if (v.record && !outside_wait_until_ && ttl_tells_expiry(t_, ttl_of(*v.record))) {
      d = next_ttl_read(r_, t_, now, d, shares(v) ? spread_ : 0.0);
    }
    if (outside_wait_until_ && *outside_wait_until_ > now)
      d = std::min(d, *outside_wait_until_ - now);   // wake when the wait ends
    return d;
  }

  /// A new key comes without its TTL: read it at once.
  bool read_streamed_record() const override { return !r_.read_at; }

  /// Why: docs/safety.md, "A follower whose stream is up asks nothing of a
  /// live holder".
  shortcut answer_without_read(const view& v, time_point now,
                               const std::function<bool()>& still_waits) override {
    if (!shares(v) || outside_wait_until_)
      return {};
    auto& id = v.record->etcd_lease_id;
    auto s = shared_->status_of(id);
    if ((s.latest && s.latest->ttl_seconds < 2) || (r_.read_at && r_.left < 2))
      return {};
    auto since = [now](std::chrono::nanoseconds age) {
      return now - std::chrono::duration_cast<caf::timespan>(age);
    };
    if (s.latest && (!r_.read_at || since(s.latest->age) > *r_.read_at)) {
      auto sent = since(s.latest->age);
      r_.read_at = sent;
      r_.left = s.latest->ttl_seconds;
      r_.zero_since.reset();
      r_.zero_revision = 0;
      if (still_waits()) {
        shortcut out;
        out.what = shortcut::kind::confirmed;   // its etcd lease lives: the holder is current
        out.confirmed_at = sent;
        return out;
      }
      // too old to wait on: read, unless a read is in flight
    }
    auto rt = t_.effective_request_timeout();
    if (s.read_begun && *s.read_begun < rt && (!r_.read_at || since(*s.read_begun) > *r_.read_at)) {
      shortcut out;
      out.what = shortcut::kind::look_again;
      out.after = std::clamp<caf::timespan>(rt / 100, 5ms, 50ms);
      return out;
    }
    shortcut out;
    if (shared_->read_begins)
      out.read_mark = shared_->read_begins(id);   // until its answer
    return out;
  }

  /// Judged once per vanish (judge_vanished_key).
  bool wait_vanished(const view& v, time_point sent, std::int64_t store_revision, time_point now,
                     std::string& warning) override {
    if (!v.record)
      return false;   // never saw the key: it holds what it creates (hold_create)
    if (v.observed_at > sent)
      return true;    // the answer predates the record the watch showed since: read again
    if (!outside_wait_until_) {
      auto& spec = v.record->spec;
      bool gapless = v.stream_up && r_.read_at && v.stream_up_since <= *r_.read_at;
      auto verdict = judge_vanished_key(v.record, r_, sent, t_, ttl_of(*v.record), gapless,
                                        store_revision);
      outside_wait_until_ = verdict.create_at;
      hold_next_create_ = verdict.hold;
      vanish_revision_ = store_revision;
      vanish_seen_revision_ = verdict.history_from;
      forget_readings();   // the key is gone: nothing left to read a TTL of
      // A key created unheld (no holder, no release) is taken by a delete
      // and a create: its vanishing is the protocol's, said by no warning.
      bool unheld = spec.holder_identity.empty() && !released_record(spec);
      if (verdict.hold && !unheld)
        warning = "the key (last seen: "
                  + (spec.holder_identity.empty() ? std::string("released")
                                                  : "held by " + spec.holder_identity)
                  + ", term " + std::to_string(spec.lease_transitions)
                  + ") vanished, and no fresh reading of its etcd lease at 0 s shows it ran out: "
                    "a key created now starts its term "
                  + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     t_.lease_duration).count())
                  + "ms later, in case its holder still works";
    }
    return now < *outside_wait_until_;
  }

  /// A replica that never saw the key cannot have waited out an operator's
  /// delete of a live term: it holds. Else the store checks the history.
  bool hold_create(const view& v, lease& create) override {
    bool hold = !v.record || hold_next_create_ || vanish_revision_ == 0;
    if (!hold) {
      create.absent_at_revision = vanish_revision_;
      create.seen_at_revision = vanish_seen_revision_;
    }
    return hold;
  }

  /// By the create's answer any term whose key was gone before the create
  /// had sent its last renew.
  bool hold_from_answer() const override { return true; }

private:
  bool shares(const view& v) const {
    if (!shared_ || !shared_->status_of || !v.record)
      return false;
    auto& id = v.record->etcd_lease_id;
    return !id.empty() && id != "0" && !v.record->spec.holder_identity.empty()
           && ttl_tells_expiry(t_, ttl_of(*v.record));
  }

  caf::timespan ttl_of(const lease& rec) const {
    return std::chrono::seconds(
      std::max(1, rec.spec.lease_duration_seconds.value_or(duration_seconds(t_.lease_duration))));
  }

  void forget_readings() {
    r_.read_at.reset();
    r_.zero_since.reset();
    r_.zero_revision = 0;
  }

  /// A follower's own draw in [0, 1): splitmix64 of its seed.
  static double draw(std::uint64_t seed) {
    auto z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
  }

  election_timings t_;
  double spread_;   // this follower's draw (next_ttl_read's spread)
  std::shared_ptr<const etcd_shared_readings> shared_;
  etcd_key_readings r_;
  std::optional<time_point> outside_wait_until_;   // no create before this (a vanish judged)
  bool hold_next_create_ = false;                  // the vanish was not judged a run-out
  std::int64_t vanish_revision_ = 0;               // the store revision of the read that judged it
  std::int64_t vanish_seen_revision_ = 0;          // ran out: the revision it was last read present at
};

} // namespace

std::shared_ptr<lease_evidence> make_etcd_evidence(const election_timings& t, std::uint64_t seed,
                                                   std::shared_ptr<const etcd_shared_readings> shared) {
  return std::make_shared<etcd_evidence>(t, seed, std::move(shared));
}

} // namespace leasehold
