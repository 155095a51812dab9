#include "template/jinja/jinja.hpp"

#include <new>

#include "template/jinja/interpreter.hpp"
#include "template/jinja/lexer.hpp"
#include "template/jinja/parser.hpp"

namespace conveyor::jinja {

Expected<Template> Template::parse(std::string_view source) {
  try {
    return Template(parse_program(source));
  } catch (const SyntaxError& e) {
    return make_error(Errc::bad_format, "line " + std::to_string(e.line) + ": " + e.message);
  } catch (const RenderError& e) {  // a literal too large to build
    return make_error(Errc::bad_format, e.message);
  } catch (const std::bad_alloc&) {
    return make_error(Errc::resource_exhausted, "out of memory while parsing the template");
  }
}

Expected<Rendered> Template::render(const boost::json::object& data_context,
                                    const boost::json::object& template_context,
                                    const RenderOptions& options) const {
  Interpreter interpreter(options);
  try {
    return interpreter.render(*program_, data_context, template_context);
  } catch (const RenderError& e) {
    return make_error(Errc::invalid_argument, "line " + std::to_string(interpreter.line()) + ": " + e.message);
  } catch (const std::bad_alloc&) {
    return make_error(Errc::resource_exhausted, "out of memory while rendering the template");
  }
}

}  // namespace conveyor::jinja
