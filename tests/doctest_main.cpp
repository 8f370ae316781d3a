// One doctest main shared by every test executable. Beyond doctest's own, it
// knows skipped cases (tests/support/skip.hpp): it lists them after the run,
// and the executable exits 77 (meson: SKIP) when every case that ran was
// skipped, or when no case ran at all, instead of 0 (a pass).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/skip.hpp"

namespace {

struct skip_record {
  std::mutex mtx;
  bool current_skipped = false;
  std::string current_why;
  int ran = 0;                       // test cases entered
  std::vector<std::string> skipped;  // "name: why"
};

skip_record& record() {
  static skip_record r;
  return r;
}

/// Counts the cases that ran and those that called mark_skipped.
struct skip_listener : doctest::IReporter {
  explicit skip_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {
    auto& r = record();
    std::lock_guard<std::mutex> g(r.mtx);
    ++r.ran;
    r.current_skipped = false;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    auto& r = record();
    std::lock_guard<std::mutex> g(r.mtx);
    if (r.current_skipped)
      r.skipped.push_back(std::string(doctest::getContextOptions()->currentTest->m_name) + ": "
                          + r.current_why);
    r.current_skipped = false;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

} // namespace

REGISTER_LISTENER("leasehold_skips", 1, skip_listener);

namespace leasehold::test {

void mark_skipped(const std::string& why) {
  auto& r = record();
  std::lock_guard<std::mutex> g(r.mtx);
  r.current_skipped = true;
  r.current_why = why;
}

} // namespace leasehold::test

int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  int rc = ctx.run();
  if (ctx.shouldExit())   // --help, --list-test-cases, ...
    return rc;
  auto& r = record();
  for (auto& s : r.skipped)
    std::printf("[leasehold] skipped: %s\n", s.c_str());
  if (!r.skipped.empty())
    std::printf("[leasehold] skipped test cases: %zu of %d\n", r.skipped.size(), r.ran);
  if (rc == 0 && r.ran == 0) {
    std::printf("[leasehold] no test case ran: reported as skipped (exit 77)\n");
    return 77;
  }
  if (rc == 0 && static_cast<int>(r.skipped.size()) == r.ran) {
    std::printf("[leasehold] every test case that ran was skipped (exit 77)\n");
    return 77;
  }
  return rc;
}
