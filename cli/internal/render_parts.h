// What the render*.cc files share beyond render.h: "Key: value" blocks, the cells that several
// kinds of reply have in common, and the table of jobs that `tide status` shows too. Replies are
// read as render.h reads them: a missing or mistyped field prints as "-".
#pragma once

#include <ctime>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/json.h"
#include "cli/render.h"

namespace tidepool::cli::internal {

// "Key: value" lines with the values aligned; keys right-aligned or left-aligned.
void render_fields(std::ostream& out,
                   const std::vector<std::pair<std::string, std::string>>& fields, Align keys);

// Unix seconds as a UTC time, "2024-05-01T22:00:05Z"; "-" for null or anything not a time.
std::string utc_time(const Json& unix_seconds);

// A list of numbers or names, comma-separated; "-" when empty.
std::string joined(const Json& list);

// human_bytes and human_rate of a JSON number.
std::string bytes_of(const Json& value);
std::string rate_of(const Json& value);

// "node 2 (serving)", or "- (unknown)" when there is no such node.
std::string node_and_state(const Json& node, const Json& state);

// After a reply gathered from every node: the nodes that did not answer, if any.
void render_unanswered(std::ostream& out, const Json& reply);

// The jobs not ended, as `tide job jobs list` and `tide status` show them: running times are
// counted up to `now` (Unix seconds).
Table jobs_table(const Json& jobs, std::time_t now);

}  // namespace tidepool::cli::internal
