// A document given as the events that write it (objects, arrays, keys, values, in order), so that a
// part renders a report once and each front end builds its own values from it: the CLI prints it as
// JSON text, the Python bindings build dicts and lists with no text in between.
//
// A writer receives a well-formed sequence: BeginObject ... EndObject and BeginArray ... EndArray
// nest; inside an object each value follows its Key. Numbers that are not finite never reach a
// writer: the document gives them as Null (as JSON has no NaN).
#ifndef KWATT_CORE_DOCUMENT_WRITER_H_
#define KWATT_CORE_DOCUMENT_WRITER_H_

#include <cstdint>
#include <string_view>

namespace kwatt {

class DocumentWriter {
 public:
  virtual ~DocumentWriter() = default;

  virtual void BeginObject() = 0;
  virtual void EndObject() = 0;
  virtual void BeginArray() = 0;
  virtual void EndArray() = 0;
  // The key of the object member whose value comes next.
  virtual void Key(std::string_view key) = 0;

  virtual void Null() = 0;
  virtual void Bool(bool value) = 0;
  virtual void Integer(int64_t value) = 0;
  // REQUIRES: `value` is finite.
  virtual void Double(double value) = 0;
  virtual void String(std::string_view value) = 0;
};

}  // namespace kwatt

#endif  // KWATT_CORE_DOCUMENT_WRITER_H_
