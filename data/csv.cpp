// CSV parsing (csv.h): one pass over the text with a small state machine (in a quoted
// field or not), counting lines for the messages.
#include "data/csv.h"

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"

namespace kiln::data {

int64_t CsvTable::column(const std::string& name) const {
  for (size_t c = 0; c < columns.size(); ++c) {
    if (columns[c] == name) return static_cast<int64_t>(c);
  }
  return -1;
}

CsvTable parse_csv(std::string_view text, const std::string& name) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  CsvTable table;
  std::vector<std::string> row;
  std::string field;
  int64_t line = 1, row_line = 1;
  bool quoted = false, after_quote = false, row_started = false;
  const auto end_row = [&] {
    row.push_back(std::move(field));
    field.clear();
    if (table.columns.empty()) {
      std::set<std::string> seen;
      for (const std::string& column : row) {
        KILN_CHECK(!column.empty(), "CSV '", name, "': line ", row_line, ": an empty column name");
        KILN_CHECK(seen.insert(column).second, "CSV '", name, "': line ", row_line, ": column '", column,
                   "' twice");
      }
      table.columns = std::move(row);
    } else {
      KILN_CHECK(row.size() == table.columns.size(), "CSV '", name, "': line ", row_line, " has ", row.size(),
                 " fields, the header has ", table.columns.size());
      table.rows.push_back(std::move(row));
      table.lines.push_back(row_line);
    }
    row.clear();
    after_quote = row_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
        after_quote = true;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // CRLF: the LF ends the row
    if (c == '\n') {
      if (row_started) end_row();
      row_line = ++line;
      continue;
    }
    if (!row_started) {
      row_started = true;
      row_line = line;
    }
    if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      after_quote = false;
    } else if (c == '"' && field.empty() && !after_quote) {
      quoted = true;
    } else {
      KILN_CHECK(!after_quote, "CSV '", name, "': line ", line, ": text after a closing quote");
      field += c;
    }
  }
  KILN_CHECK(!quoted, "CSV '", name, "': line ", row_line, ": a quoted field is never closed");
  if (row_started) end_row();
  KILN_CHECK(!table.columns.empty(), "CSV '", name, "': no header row");
  return table;
}

CsvTable read_csv(const std::string& path) { return parse_csv(read_text_file(path, "CSV"), path); }

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace kiln::data
