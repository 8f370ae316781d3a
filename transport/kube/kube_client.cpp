#include "transport/kube/kube_client.hpp"

#include "lease/lease_json.hpp"
#include "transport/http/http_errors.hpp"

namespace leasehold {

namespace {

constexpr const char* lease_group_prefix = "/apis/coordination.k8s.io/v1/namespaces/";

} // namespace

std::string lease_path(const lease_key& k) {
  return leases_path(k.ns) + "/" + k.name;
}

std::string leases_path(const std::string& ns) {
  return lease_group_prefix + ns + "/leases";
}

std::string events_path(const std::string& ns) {
  return "/api/v1/namespaces/" + ns + "/events";
}

std::string kube_request_path(const std::string& verb, const lease_key& k) {
  return verb == "POST" ? leases_path(k.ns) : lease_path(k);
}

namespace {

/// A request carrying the JSON of `l` (`fresh`: without its version, as a
/// create must be sent).
kube_lease_request with_lease(const std::string& verb, const std::string& path, const lease& l,
                              bool fresh, bool echo) {
  kube_lease_request r{verb, path, std::nullopt, echo ? l.name : std::string{}, {}};
  auto body = never_throw<std::string>(verb, path, [&] {
    if (!fresh)
      return api_result<std::string>::success(to_json_text(l));
    auto copy = l;
    copy.resource_version.clear(); // the API rejects a create that names a version
    return api_result<std::string>::success(to_json_text(copy));
  });
  if (body.ok())
    r.body = std::move(*body.value);
  else
    r.error = body.error;
  return r;
}

kube_lease_request get_request(const lease_key& k) {
  return {"GET", lease_path(k), std::nullopt, {}, {}};
}
kube_lease_request create_request(const lease& l) {
  return with_lease("POST", leases_path(l.ns), l, true, false);
}
kube_lease_request update_request(const lease& l) {
  return with_lease("PUT", lease_path(l.key()), l, false, l.skip_watch_echo);
}

template <class T, class F>
std::vector<kube_lease_request> requests_of(const std::vector<T>& items, F make) {
  std::vector<kube_lease_request> out;
  out.reserve(items.size());
  for (auto& i : items)
    out.push_back(make(i));
  return out;
}

} // namespace

api_result<lease> kube_client::lease_answer(const kube_lease_request& r,
                                            const api_result<http_response>& reply) {
  if (!reply.ok())
    return api_result<lease>::failure(reply.error);
  return never_throw<lease>(r.verb, r.path, [&] {
    auto out = lease_from_response(r.verb, r.path, reply.value->status, reply.value->body,
                                   reply.value->retry_after);
    if (!r.echo_of.empty() && echoes_ && out.ok())
      echoes_->note(reply.value->body, out.value->name, out.value->resource_version);
    return out;
  });
}

std::vector<api_result<lease>>
kube_client::lease_calls(const std::vector<kube_lease_request>& reqs) {
  std::vector<api_result<lease>> out(reqs.size());
  std::vector<http_call> calls;
  std::vector<std::size_t> sent;   // calls[j] is reqs[sent[j]]
  std::vector<std::string_view> echoes_of;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].error.kind != error_kind::none) {
      out[i] = api_result<lease>::failure(reqs[i].error);
      continue;
    }
    calls.push_back({reqs[i].verb, reqs[i].path, reqs[i].body ? &*reqs[i].body : nullptr});
    sent.push_back(i);
    if (!reqs[i].echo_of.empty())
      echoes_of.push_back(reqs[i].echo_of);
  }
  // Their events may reach the stream before these answers are noted
  // (below): the stream waits for them while this flight is out.
  auto landing = echoes_ ? echoes_->depart(echoes_of) : watch_echoes::flight{};
  if (calls.size() == 1) {
    auto& c = calls.front();
    out[sent.front()] = lease_answer(reqs[sent.front()], http_.send(c.verb, c.path, c.body));
  } else if (calls.size() > 1) {
    auto replies = http_.send_all(calls);
    for (std::size_t j = 0; j < sent.size(); ++j)
      out[sent[j]] = lease_answer(reqs[sent[j]], replies[j]);
  }
  return out;
}

api_result<lease> kube_client::get_lease(const lease_key& k) {
  return std::move(lease_calls({get_request(k)}).front());
}

api_result<lease> kube_client::create_lease(const lease& l) {
  return std::move(lease_calls({create_request(l)}).front());
}

api_result<lease> kube_client::update_lease(const lease& l) {
  return std::move(lease_calls({update_request(l)}).front());
}

std::vector<api_result<lease>> kube_client::get_leases(const std::vector<lease_key>& ks) {
  return lease_calls(requests_of(ks, get_request));
}

std::vector<api_result<lease>> kube_client::create_leases(const std::vector<lease>& ls) {
  return lease_calls(requests_of(ls, create_request));
}

std::vector<api_result<lease>> kube_client::renew_leases(const std::vector<lease>& ls) {
  return lease_calls(requests_of(ls, update_request));
}

std::vector<api_result<lease>> kube_client::write_leases(const std::vector<lease>& ls) {
  return lease_calls(requests_of(ls, update_request));
}

api_result<std::vector<lease>> kube_client::list_leases(const std::string& ns,
                                                       const std::string& selector) {
  using result = api_result<std::vector<lease>>;
  auto eq = selector.find('=');
  const auto path = leases_path(ns) + "?labelSelector=" + selector.substr(0, eq)
                    + (eq == std::string::npos ? "" : "%3D" + selector.substr(eq + 1));
  return never_throw<std::vector<lease>>("GET", path, [&] {
    auto reply = http_.send("GET", path, nullptr);
    if (auto e = reply_error("GET", path, reply); e.kind != error_kind::none)
      return result::failure(e);
    auto bad = [&](const std::string& why) {
      return result::failure({error_kind::malformed_body, reply.value->status, "GET", path, why, 0});
    };
    if (auto plain = read_plain_lease_list(reply.value->body))
      return result::success(std::move(*plain));   // no document of the whole list
    auto doc = nlohmann::json::parse(reply.value->body, nullptr, false);
    auto items = doc.is_object() ? doc.find("items") : doc.end();
    if (!doc.is_object() || items == doc.end() || !items->is_array())
      return bad("items: expected an array");
    std::vector<lease> out;
    for (std::size_t i = 0; i < items->size(); ++i) {
      auto p = parse_lease((*items)[i]);
      if (!p.ok())
        return bad("items[" + std::to_string(i) + "]." + p.error);
      out.push_back(std::move(*p.value));
    }
    return result::success(std::move(out));
  });
}

api_result<bool> kube_client::create_event(const kube_event& e) {
  const auto path = events_path(e.involved.ns);
  return never_throw<bool>("POST", path, [&] {
    auto body = to_json_value(e).dump();
    auto e = reply_error("POST", path, http_.send("POST", path, &body));
    if (e.kind != error_kind::none)
      return api_result<bool>::failure(e);
    return api_result<bool>::success(true);
  });
}

} // namespace leasehold
