#include "cmd/leasehold-apiserver/snapshot.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "cmd/leasehold-apiserver/server_impl.hpp"

namespace leasehold {

using nlohmann::json;

namespace apiserver {

std::string load_snapshot(const std::string& file, object_store& store) {
  std::ifstream in(file);
  if (!in)
    return "";   // absent: start empty
  json snap = json::parse(in, nullptr, false);
  if (snap.is_discarded())
    return "snapshot " + file + ": not valid JSON";
  return store.restore(snap);
}

std::string write_snapshot(const std::string& file, const json& snap) {
  std::string tmp = file + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr)
    return "cannot write " + tmp;
  std::string text = snap.dump();
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
            fsync(fileno(f)) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), file.c_str()) != 0)
    return "cannot write " + file;
  return "";
}

} // namespace apiserver

void local_api_server::impl::snapshot_loop() {
  std::uint64_t written = snapshot_written;
  for (bool last = false; !last;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      last = cv.wait_for(lock, opts.snapshot_interval, [&] { return snapshot_done; });
    }
    auto current = store.mutations();
    if (current == written)
      continue;
    if (auto error = apiserver::write_snapshot(opts.snapshot_file, store.snapshot()); !error.empty())
      log("snapshot failed", {{"error", error}});
    written = current;
  }
}

} // namespace leasehold
