//===- FileUtils.cpp - writing output files safely -----------------------===//

#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstring>
#include <exception>
#include <new>
#include <system_error>
#include <unistd.h>

namespace tessera::runtime {

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef data) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status)) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return fail("cannot write '" + path + "': " + ec.message());
    os << data;
    return llvm::Error::success();
  }
  llvm::SmallString<256> tmp;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, tmp))
    return fail("cannot create a file next to '" + path + "': " + ec.message());
  // Removed if the process dies of a signal or a fatal error meanwhile.
  llvm::sys::RemoveFileOnSignal(tmp);
  llvm::scope_exit forget([&] { llvm::sys::DontRemoveFileOnSignal(tmp); });
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << data;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return fail("cannot write '" + tmp + "' (disk full?)");
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return fail("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readRegularFile(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail("cannot read '" + path + "': " + ec.message());
  if (!llvm::sys::fs::is_regular_file(status))
    return fail("cannot read '" + path + "': not a regular file (devices, pipes and "
                "directories are not read)");
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read '" + path + "': " + file.getError().message());
  return std::move(*file);
}

namespace {
const char *toolName = "tessera";

/// Reports "<tool>: error: <parts...>" with one write(2) (several threads may
/// fail at once; the first one reports) without allocating (the heap may be
/// what ran out), removes the temporary files of outputs being written, and
/// exits with status 1.
[[noreturn]] void reportAndExit(std::initializer_list<const char *> parts) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true))
    for (;;)
      ::pause(); // the first thread's _exit ends this one too
  char message[1024] = {0};
  auto append = [&](const char *text) {
    if (text)
      std::strncat(message, text, sizeof(message) - std::strlen(message) - 2);
  };
  append(toolName);
  append(": error: ");
  for (const char *part : parts)
    append(part);
  append("\n");
  if (ssize_t ignored = ::write(2, message, std::strlen(message)))
    (void)ignored;
  llvm::sys::RunInterruptHandlers(); // removes half-written temporary files
  ::_exit(1);
}

[[noreturn]] void outOfMemory(const char *detail) {
  reportAndExit({"out of memory (", detail ? detail : "", "); nothing was written. "
                 "Give the process more memory (ulimit -v), or compile a smaller batch"});
}
} // namespace

void installResourceErrorHandlers(const char *tool) {
  toolName = tool;
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *reason, bool) { outOfMemory(reason); });
  // LLVM's fatal errors (a thread it cannot start) would abort.
  llvm::install_fatal_error_handler([](void *, const char *reason, bool) {
    reportAndExit({reason, "; nothing was written (out of memory or threads? give "
                           "the process more)"});
  });
  std::set_new_handler([] { outOfMemory("an allocation failed"); });
  // Threads that cannot be created, or memory that cannot be had, surface
  // as exceptions no one catches: report those as a lack of resources;
  // anything else is a bug, left to abort with its backtrace.
  static std::terminate_handler previous = std::set_terminate([] {
    if (std::exception_ptr current = std::current_exception()) {
      try {
        std::rethrow_exception(current);
      } catch (const std::bad_alloc &) {
        outOfMemory("an allocation failed");
      } catch (const std::system_error &e) {
        reportAndExit({"out of system resources (", e.what(),
                       "); nothing was written. Give the process more memory or threads"});
      } catch (...) {
      }
    }
    previous();
  });
}

} // namespace tessera::runtime
