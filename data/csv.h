// CSV tables (RFC 4180), as far as dataset manifests need them: the first row names the
// columns; fields are separated by commas; a field in double quotes may hold commas,
// line breaks and doubled quotes (""); rows end with LF or CRLF; empty lines and a UTF-8
// byte-order mark are skipped. Every row must have as many fields as the header. A
// violation (an unterminated quote, text after a closing quote, a short or long row,
// duplicate or empty column names) is a kiln::Error naming the file and the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

struct CsvTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;  // the line each row starts on (1-based, the header is line 1)
  // The index of column `name`, or -1.
  int64_t column(const std::string& name) const;
};

CsvTable parse_csv(std::string_view text, const std::string& name);

// A CSV field as written: quoted when it holds a comma, a quote or a line break (quotes
// doubled), so parse_csv reads it back as it was.
std::string csv_field(const std::string& text);
// The file at `path` (an error naming it when unreadable).
CsvTable read_csv(const std::string& path);

}  // namespace kiln::data
