#include "transport/http/http_answer.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>

namespace leasehold {

namespace {

constexpr std::size_t max_head = 64 * 1024;
constexpr std::size_t max_body = 16 * 1024 * 1024;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool icontains(std::string_view text, std::string_view word) {
  for (std::size_t i = 0; i + word.size() <= text.size(); ++i)
    if (iequals(text.substr(i, word.size()), word))
      return true;
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// `text`, all of it, as a number in `base` (digits only: no sign, no prefix).
bool whole_number(std::string_view text, std::size_t& out, int base) {
  auto end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, out, base);
  return ec == std::errc{} && at == end;
}

/// What one answer's head says about its body.
struct head_info {
  int status = 0;
  bool http10 = false;
  bool chunked = false;
  bool has_length = false;
  std::size_t length = 0;
  bool close = false;
  bool keep_alive = false;
  std::string retry_after;
};

/// Parses the head `h` (status line and headers, without the blank line).
bool parse_head(std::string_view h, head_info& out, std::string& err) {
  auto eol = h.find("\r\n");
  auto line = h.substr(0, eol);
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[8] != ' ' ||
      !std::all_of(line.begin() + 9, line.begin() + 12, [](char c) { return c >= '0' && c <= '9'; })) {
    err = "status line: not HTTP/1.x";
    return false;
  }
  out.http10 = line[7] == '0';
  out.status = std::stoi(std::string(line.substr(9, 3)));
  while (eol != std::string_view::npos) {
    h.remove_prefix(eol + 2);
    eol = h.find("\r\n");
    auto field = h.substr(0, eol);
    auto colon = field.find(':');
    if (colon == std::string_view::npos) {
      err = "header line without ':'";
      return false;
    }
    auto name = trim(field.substr(0, colon));
    auto value = trim(field.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      if (value.size() > 9 || !whole_number(value, out.length, 10)) {
        err = "Content-Length: not a number";
        return false;
      }
      out.has_length = true;
    } else if (iequals(name, "Transfer-Encoding")) {
      out.chunked = icontains(value, "chunked");
    } else if (iequals(name, "Connection")) {
      out.close = out.close || icontains(value, "close");
      out.keep_alive = out.keep_alive || icontains(value, "keep-alive");
    } else if (iequals(name, "Retry-After")) {
      out.retry_after = std::string(value);
    }
  }
  if (out.http10 && !out.keep_alive)
    out.close = true;
  return true;
}

/// A chunked body from `p` (size `n`): complete when its last chunk and
/// trailers were read; `used` the bytes they took.
http_answer_parse::state_t read_chunked(const char* p, std::size_t n, std::string& body,
                                        std::size_t& used, std::string& err) {
  std::string_view in(p, n);
  std::size_t at = 0;
  for (;;) {
    auto eol = in.find("\r\n", at);
    if (eol == std::string_view::npos)
      return n - at > 1024 ? (err = "chunk size line too long", http_answer_parse::malformed)
                           : http_answer_parse::incomplete;
    auto size_text = trim(in.substr(at, eol - at));
    size_text = size_text.substr(0, size_text.find(';'));   // chunk extensions
    std::size_t size = 0;
    if (size_text.size() > 8 || !whole_number(size_text, size, 16)) {
      err = "chunk size: not a hex number";
      return http_answer_parse::malformed;
    }
    at = eol + 2;
    if (size == 0) {   // trailers, then a blank line
      for (;;) {
        auto end = in.find("\r\n", at);
        if (end == std::string_view::npos)
          return http_answer_parse::incomplete;
        bool blank = end == at;
        at = end + 2;
        if (blank) {
          used = at;
          return http_answer_parse::complete;
        }
      }
    }
    if (body.size() + size > max_body) {
      err = "body: larger than 16 MiB";
      return http_answer_parse::malformed;
    }
    if (n - at < size + 2)
      return http_answer_parse::incomplete;
    if (in.substr(at + size, 2) != "\r\n") {
      err = "chunk: no CRLF after its data";
      return http_answer_parse::malformed;
    }
    body.append(p + at, size);
    at += size + 2;
  }
}

} // namespace

http_answer_parse parse_http_answer(const char* data, std::size_t size, bool eof) {
  http_answer_parse out;
  std::string_view in(data, size);
  std::size_t start = 0;
  head_info head;
  for (;;) {   // interim 1xx answers are skipped
    auto end = in.find("\r\n\r\n", start);
    if (end == std::string_view::npos) {
      if (size - start > max_head) {
        out.state = http_answer_parse::malformed;
        out.error = "head: larger than 64 KiB";
      }
      return out;
    }
    head = head_info{};
    if (!parse_head(in.substr(start, end - start), head, out.error)) {
      out.state = http_answer_parse::malformed;
      return out;
    }
    start = end + 4;
    if (head.status >= 200 || head.status == 101)
      break;
  }
  out.got_head = true;
  out.close = head.close;
  out.response.status = head.status;
  out.response.retry_after = head.retry_after;
  const char* body_at = data + start;
  std::size_t avail = size - start;
  if (head.status == 204 || head.status == 304) {
    out.consumed = start;
  } else if (head.chunked) {
    std::size_t used = 0;
    std::string body;
    out.state = read_chunked(body_at, avail, body, used, out.error);
    if (out.state != http_answer_parse::complete)
      return out;
    out.response.body = std::move(body);
    out.consumed = start + used;
  } else if (head.has_length) {
    if (head.length > max_body) {
      out.state = http_answer_parse::malformed;
      out.error = "body: larger than 16 MiB";
      return out;
    }
    if (avail < head.length)
      return out;
    out.response.body.assign(body_at, head.length);
    out.consumed = start + head.length;
  } else {   // the body ends with the connection
    if (!eof)
      return out;
    out.response.body.assign(body_at, avail);
    out.consumed = size;
    out.close = true;
  }
  out.state = http_answer_parse::complete;
  return out;
}

} // namespace leasehold
