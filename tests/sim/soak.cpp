// scripts/soak: runs any number of simulation seeds and reports throughput.
//   sim-soak --seeds N [--first S] [--backend kubernetes|etcd] [--no-shrink]
//            [--leases L [--replicas R] [--groups]]   (the multi-lease world: L leases per
//            replica; --groups: one balance group over them, with its figures)
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "sim_cluster.hpp"

using namespace leasehold::sim;

int main(int argc, char** argv) {
  std::uint64_t seeds = 1000, first = 1;
  bool shrink = true;
  backend_kind backend = backend_kind::kubernetes;
  world w;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seeds") && i + 1 < argc)
      seeds = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--first") && i + 1 < argc)
      first = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--backend") && i + 1 < argc && parse_backend(argv[i + 1]))
      backend = *parse_backend(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-shrink"))
      shrink = false;
    else if (!std::strcmp(argv[i], "--leases") && i + 1 < argc)
      w.leases = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--replicas") && i + 1 < argc)
      w.replicas = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--groups"))
      w.groups = true;
    else {
      std::cerr << "usage: sim-soak --seeds N [--first S] [--backend kubernetes|etcd] [--no-shrink]"
                   " [--leases L [--replicas R] [--groups]]\n";
      return 2;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t steps = 0, failed = 0;
  double simulated = 0;
  double max_unowned = 0, max_to_balance = 0;
  std::size_t max_moves = 0, judgements = 0;
  std::size_t takes = 0, foreign_takes = 0, session_renews = 0, bound_writes = 0;
  for (auto s = first; s < first + seeds; ++s) {
    auto rep = run_seed(s, backend, shrink, w);
    steps += rep.result.steps;
    simulated += std::chrono::duration<double>(rep.result.simulated).count();
    auto& r = rep.result;
    // As fractions of the seed's bound (each seed draws its own timings).
    auto bound = std::max(1e-9, std::chrono::duration<double>(r.group_bound).count());
    max_unowned = std::max(max_unowned, std::chrono::duration<double>(r.group_max_unowned).count() / bound);
    max_to_balance = std::max(max_to_balance,
                              std::chrono::duration<double>(r.group_max_to_balance).count() / bound);
    max_moves = std::max(max_moves, r.group_max_moves);
    judgements += r.group_judgements;
    takes += r.takes;
    foreign_takes += r.foreign_takes;
    session_renews += r.session_renews;
    bound_writes += r.bound_writes;
    if (!rep.result.ok) {
      ++failed;
      std::cout << format_failure(rep) << std::flush;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "soak (" << to_string(backend);
  if (w.many())
    std::cout << ", " << w.leases << " leases x " << (w.replicas > 0 ? std::to_string(w.replicas) : "drawn")
              << " replicas";
  std::cout << "): seeds " << first << ".." << first + seeds - 1 << ": " << seeds - failed
            << " passed, " << failed << " failed in " << secs << " s; " << seeds / secs
            << " seeds/s, " << steps / std::max<std::uint64_t>(seeds, 1) << " steps/seed, "
            << steps / secs << " steps/s, " << simulated / seeds << " s simulated per seed\n";
  if (backend == backend_kind::kubernetes)
    std::cout << "terms taken: " << takes << " (the foreign peer's: " << foreign_takes
              << "); session Lease renews: " << session_renews << "; writes leaving a lease bound: "
              << bound_writes << "\n";
  if (w.groups)
    std::cout << "groups: " << judgements << " balanced states judged; longest unowned " << max_unowned * 100
              << "% of the bound, longest to balance " << max_to_balance * 100
              << "% of the bound, most moves of one change " << max_moves
              << "\n";
  return failed == 0 ? 0 : 1;
}
