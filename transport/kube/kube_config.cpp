#include "transport/kube/kube_config.hpp"
#include "transport/base64.hpp"
#include "transport/http/text_files.hpp"
#include "transport/http/server_url.hpp"

#include <cstdlib>

#include <unistd.h>

#include <yaml-cpp/yaml.h>

namespace leasehold {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string join_path(const std::string& dir, const std::string& file) {
  if (dir.empty() || dir.back() == '/')
    return dir + file;
  return dir + "/" + file;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool readable(const std::string& path) {
  return ::access(path.c_str(), R_OK) == 0;
}

kube_config_result failure(std::string message) {
  kube_config_result r;
  r.error = std::move(message);
  return r;
}

/// Reads typed fields of one kubeconfig file; the first error is kept with
/// the file name and the field's path (e.g. `users[0].user.token`).
class kubeconfig_reader {
public:
  explicit kubeconfig_reader(std::string file) : file_(std::move(file)) {}

  const std::string& error() const { return error_; }

  bool fail(const std::string& field, const std::string& message) {
    error_ = "kubeconfig " + file_ + ": " + field + ": " + message;
    return false;
  }

  /// A string field; absent or null leaves `out` unchanged.
  bool str(const YAML::Node& map, const char* key, const std::string& where, std::string& out) {
    auto v = map[key];
    if (!v || v.IsNull())
      return true;
    if (!v.IsScalar())
      return fail(where + key, "expected string");
    out = v.Scalar();
    return true;
  }

  /// A string field converted by `conv(text, out)`, which says why the text
  /// does not fit ("" when it does); absent, null or empty: `out` unchanged.
  template <class T, class Conv>
  bool converted(const YAML::Node& map, const char* key, const std::string& where, T& out,
                 Conv conv) {
    std::string text;
    if (!str(map, key, where, text))
      return false;
    if (text.empty())
      return true;
    auto why = conv(text, out);
    return why.empty() || fail(where + key, why);
  }

  bool boolean(const YAML::Node& map, const char* key, const std::string& where, bool& out) {
    return converted(map, key, where, out, [](const std::string& text, bool& b) -> std::string {
      if (text != "true" && text != "false")
        return "expected true or false";
      b = text == "true";
      return {};
    });
  }

  /// A base64 field decoded into `out`.
  bool base64(const YAML::Node& map, const char* key, const std::string& where,
              std::string& out) {
    return converted(map, key, where, out, [](const std::string& text, std::string& o) {
      auto decoded = decode_base64(text);
      if (!decoded)
        return std::string("invalid base64");
      o = std::move(*decoded);
      return std::string{};
    });
  }

  /// A file path resolved against the kubeconfig's directory; must be readable.
  bool path(const YAML::Node& map, const char* key, const std::string& where,
            std::string& out) {
    return converted(map, key, where, out, [this](const std::string& text, std::string& o) {
      o = text.front() == '/' ? text : join_path(dir_of(file_), text);
      return readable(o) ? std::string{} : o + ": unreadable";
    });
  }

  /// The `inner` map of the entry named `name` in the list `list`
  /// (clusters/contexts/users); `where` is set to e.g. "users[2].user.".
  bool find_named(const YAML::Node& root, const char* list, const char* inner,
                  const std::string& name, const std::string& referrer, YAML::Node& out,
                  std::string& where) {
    auto seq = root[list];
    if (seq && !seq.IsNull() && !seq.IsSequence())
      return fail(list, "expected list");
    for (std::size_t i = 0; seq && seq.IsSequence() && i < seq.size(); ++i) {
      auto item = seq[i];
      std::string item_name;
      const std::string at = std::string(list) + "[" + std::to_string(i) + "].";
      if (!item.IsMap())
        return fail(at.substr(0, at.size() - 1), "expected map");
      if (!str(item, "name", at, item_name))
        return false;
      if (item_name != name)
        continue;
      out = item[inner];
      where = at + inner + ".";
      if (!out || out.IsNull())
        out = YAML::Node(YAML::NodeType::Map);
      else if (!out.IsMap())
        return fail(at + inner, "expected map");
      return true;
    }
    return fail(list, "no entry named \"" + name + "\" (" + referrer + ")");
  }

private:
  std::string file_;
  std::string error_;
};

kube_config_result read_kubeconfig(kubeconfig_reader& rd, const YAML::Node& root,
                                   const std::string& context) {
  auto fail = [&](const std::string& field, const std::string& message) {
    rd.fail(field, message);
    return failure(rd.error());
  };
  if (!root.IsMap())
    return fail("document", "expected map");
  std::string ctx_name = context;
  if (ctx_name.empty() && !rd.str(root, "current-context", "", ctx_name))
    return failure(rd.error());
  if (ctx_name.empty())
    return fail("current-context", "missing");
  YAML::Node ctx, cluster, user;
  std::string ctx_at, cluster_at, user_at, cluster_name, user_name;
  kube_config_result r;
  if (!rd.find_named(root, "contexts", "context", ctx_name,
                     context.empty() ? "current-context" : "--context", ctx, ctx_at) ||
      !rd.str(ctx, "cluster", ctx_at, cluster_name) ||
      !rd.str(ctx, "user", ctx_at, user_name) || !rd.str(ctx, "namespace", ctx_at, r.ns))
    return failure(rd.error());
  if (cluster_name.empty())
    return fail(ctx_at + "cluster", "missing");
  connection_config cfg;
  if (!rd.find_named(root, "clusters", "cluster", cluster_name, ctx_at + "cluster", cluster,
                     cluster_at) ||
      !rd.str(cluster, "server", cluster_at, cfg.server) ||
      !rd.boolean(cluster, "insecure-skip-tls-verify", cluster_at,
                  cfg.insecure_skip_tls_verify) ||
      !rd.base64(cluster, "certificate-authority-data", cluster_at, cfg.ca_data) ||
      (cfg.ca_data.empty() && !rd.path(cluster, "certificate-authority", cluster_at, cfg.ca_file)))
    return failure(rd.error());
  if (cfg.server.empty())
    return fail(cluster_at + "server", "missing");
  if (auto error = server_url_error(cfg.server); !error.empty())
    return fail(cluster_at + "server", error);
  if (!user_name.empty()) {
    if (!rd.find_named(root, "users", "user", user_name, ctx_at + "user", user, user_at) ||
        !rd.str(user, "token", user_at, cfg.token) ||
        (cfg.token.empty() && !rd.path(user, "tokenFile", user_at, cfg.token_file)) ||
        !rd.base64(user, "client-certificate-data", user_at, cfg.client_cert_data) ||
        !rd.base64(user, "client-key-data", user_at, cfg.client_key_data) ||
        (cfg.client_cert_data.empty() &&
         !rd.path(user, "client-certificate", user_at, cfg.client_cert_file)) ||
        (cfg.client_key_data.empty() && !rd.path(user, "client-key", user_at, cfg.client_key_file)))
      return failure(rd.error());
    bool has_cert = !cfg.client_cert_data.empty() || !cfg.client_cert_file.empty();
    bool has_key = !cfg.client_key_data.empty() || !cfg.client_key_file.empty();
    if (has_cert != has_key)
      return fail(user_at + (has_cert ? "client-key" : "client-certificate"),
                  "missing (client certificate and key go together)");
    bool has_credentials = !cfg.token.empty() || !cfg.token_file.empty() || has_cert;
    for (const char* plugin : {"exec", "auth-provider"})
      if (!has_credentials && user[plugin])
        return fail(user_at + plugin, "not supported (use a token, tokenFile or client certificate)");
  }
  r.config = std::move(cfg);
  return r;
}

} // namespace

std::string service_account_namespace(const std::string& sa_dir) {
  auto text = read_text_file(join_path(sa_dir, "namespace"));
  return text ? trim_whitespace(*text) : std::string{};
}

kube_config_result load_in_cluster_config(const std::string& sa_dir) {
  auto host = env("KUBERNETES_SERVICE_HOST");
  auto port = env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty())
    return failure("in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  connection_config cfg;
  cfg.server = "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
               ":" + port;
  cfg.token_file = join_path(sa_dir, "token");
  auto token = read_text_file(cfg.token_file);
  if (!token || trim_whitespace(*token).empty())
    return failure("in-cluster: " + cfg.token_file + ": unreadable or empty token file");
  cfg.ca_file = join_path(sa_dir, "ca.crt");
  if (!readable(cfg.ca_file))
    return failure("in-cluster: " + cfg.ca_file + ": unreadable");
  kube_config_result r;
  r.ns = service_account_namespace(sa_dir);
  r.config = std::move(cfg);
  return r;
}

kube_config_result load_kubeconfig(const std::string& path, const std::string& context) {
  auto text = read_text_file(path);
  if (!text)
    return failure("kubeconfig " + path + ": unreadable");
  kubeconfig_reader rd(path);
  try {
    return read_kubeconfig(rd, YAML::Load(*text), context);
  } catch (const YAML::Exception& e) {
    return failure("kubeconfig " + path + ": line " + std::to_string(e.mark.line + 1) +
                   ": " + e.msg);
  } catch (const std::exception& e) {
    return failure("kubeconfig " + path + ": " + e.what());
  }
}

kube_config_result server_config(const std::string& url) {
  if (auto error = server_url_error(url); !error.empty())
    return failure("--server: " + error);   // names the URL (not one with a password)
  kube_config_result r;
  r.config = connection_config{};
  r.config->server = url;
  return r;
}

std::string default_kubeconfig_path() {
  auto list = env("KUBECONFIG");
  if (!list.empty())
    return list.substr(0, list.find(':'));
  auto home = env("HOME");
  return home.empty() ? std::string{} : join_path(home, ".kube/config");
}

kube_config_result load_connection_config(const std::string& server,
                                          const std::string& kubeconfig,
                                          const std::string& sa_dir) {
  if (!server.empty())
    return server_config(server);
  if (!kubeconfig.empty())
    return load_kubeconfig(kubeconfig);
  if (!env("KUBERNETES_SERVICE_HOST").empty())
    return load_in_cluster_config(sa_dir);
  auto path = default_kubeconfig_path();
  if (path.empty())
    return failure("no API server configured: pass --server or --kubeconfig, run in-cluster, "
                   "or set KUBECONFIG or HOME");
  return load_kubeconfig(path);
}

} // namespace leasehold
