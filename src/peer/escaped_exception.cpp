#include "peer/escaped_exception.h"

#include <new>
#include <string>
#include <system_error>

namespace ferry::peer {

Status status_of_current_exception(std::string_view what_failed) {
  std::string prefix(what_failed);
  prefix += ": ";
  try {
    throw;
  } catch (const Error& e) {
    return Status::failure(e.code() == Errc::system ? Errc::system : Errc::internal, prefix + e.what());
  } catch (const std::bad_alloc&) {
    return Status::failure(Errc::system, prefix + "out of memory");
  } catch (const std::system_error& e) {
    // std::thread reports a refused thread this way (EAGAIN: "Resource temporarily unavailable").
    return Status::failure(Errc::system, prefix + e.what());
  } catch (const std::exception& e) {
    return Status::failure(Errc::internal, prefix + e.what());
  } catch (...) {
    return Status::failure(Errc::internal, prefix + "an unknown exception");
  }
}

}  // namespace ferry::peer
