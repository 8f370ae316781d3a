// One HTTP/1.1 answer read from the front of a connection's received bytes,
// for the pipelined calls (http_pipeline.hpp): Content-Length, chunked
// bodies, bodies to the close, interim 1xx answers and `Connection: close`.
#pragma once

#include <cstddef>
#include <string>

#include "transport/http/http_client.hpp"

namespace leasehold {

struct http_answer_parse {
  enum state_t { incomplete, complete, malformed };
  state_t state = incomplete;
  std::size_t consumed = 0;   // complete: the bytes this answer took
  bool got_head = false;      // its status line and headers were read
  bool close = false;         // complete: the server ends the connection after it
  http_response response;     // complete: status, body, Retry-After
  std::string error;          // malformed: what is wrong
};

/// The answer at the front of `data` (`size` bytes received so far; `eof`:
/// the connection ended after them). Bodies above 16 MiB and heads above
/// 64 KiB are malformed.
http_answer_parse parse_http_answer(const char* data, std::size_t size, bool eof);

} // namespace leasehold
