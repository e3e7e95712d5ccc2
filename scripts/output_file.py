"""scripts/output_file.py: how the scripts write their outputs, with the standard library alone
(plot_log.py and random_tokens.py run on python3 without numpy), by the rules of the C programs
(common/atomic_file.h):
- a file's new content goes to a temporary sibling created exclusively under a name of its own
  (PATH.tmpXXXXXXXX), and is renamed over the path once complete and on disk, so a reader or a
  crash sees the old file or the whole new one; SIGINT or SIGTERM during the write removes it;
- a symbolic link at the path is followed: the file it names (its canonical path) is replaced,
  the link stays;
- a device, a FIFO or a socket is written in place, and so is a file reached through a link that
  names no path to it (/dev/stdout or /proc/self/fd/N on a deleted file); a directory is
  refused, and so are a path not yet made that ends in '/' and an empty name;
- a path that names one of the program's inputs (directly, through a link or a hard link) is
  refused, so an input is never lost;
- a folder of files (export_hf.py's) is built in a temporary folder beside it and renamed into
  place, where nothing or an empty folder was (not the current folder: a shell in it would be
  left in a removed folder).
"""
import contextlib
import os
import shutil
import signal
import stat
import tempfile
import threading


class Failure(Exception):
    """A one-line reason the script cannot go on."""


def fail(message):
    raise Failure(message)


def plan(path):
    """How path is written, as common/atomic_file.c plans it: (the file to write, its os.stat or
    None where nothing is there yet, whether it is written in place)."""
    if not path:
        fail("'': empty path")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        fail(f"{path}: cannot write ({e.strerror})")
    if st is not None and stat.S_ISDIR(st.st_mode):
        fail(f"{path}: is a directory")
    if st is None and path.endswith("/"):
        fail(f"{path}: ends in '/', as only a folder's name does")
    if st is None or stat.S_ISREG(st.st_mode):
        target = os.path.realpath(path)
        try:
            if st is None or os.path.samestat(st, os.stat(target)):
                return target, st, False
        except OSError:  # the link names no path that leads to the file
            pass
    return path, st, True


def check_output(path, inputs=()):
    """Says whether path could be written, without writing: for a script to check its output
    before long work. Returns (the file to write, whether it is written in place), or raises
    Failure."""
    target, st, in_place = plan(path)
    if st is not None:
        for name in inputs:
            try:
                same = os.path.samestat(st, os.stat(name))
            except OSError:
                continue
            if same:
                fail(f"{path}: is the input {name} (not overwritten)")
    folder = os.path.dirname(target)
    if in_place:
        if not os.access(target, os.W_OK):
            fail(f"{path}: cannot write (permission denied)")
    elif not os.path.isdir(folder):
        fail(f"{path}: cannot write ({folder}: no such folder)")
    elif not os.access(folder, os.W_OK | os.X_OK):
        fail(f"{path}: cannot write in {folder} (permission denied)")
    return target, in_place


@contextlib.contextmanager
def signals_end_the_program():
    """While a temporary exists: SIGINT and SIGTERM end the program through SystemExit (status
    128 + the signal), so the temporary is removed on the way out. Only where the program left
    their default handling, and only in the main thread (the only one that may set handlers)."""
    def end(sig, frame):
        raise SystemExit(128 + sig)

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig, default in ((signal.SIGINT, signal.default_int_handler),
                             (signal.SIGTERM, signal.SIG_DFL)):
            if signal.getsignal(sig) is default:
                saved[sig] = signal.signal(sig, end)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held():
    """SIGINT and SIGTERM held back while a temporary is made and its name kept: one that comes
    meanwhile ends the program as the block ends, when the temporary can be removed, rather than
    between its making and its name's keeping, which would leave it behind."""
    saved = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, saved)


def umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path, inputs=(), binary=True):
    """A file to write path's new content to (binary, or UTF-8 text), by the rules above; inputs
    are the paths the program reads. Complete when the block ends without an exception; an
    OSError inside it becomes a Failure naming path."""
    target, in_place = check_output(path, inputs)
    mode, encoding = ("wb", None) if binary else ("w", "utf-8")
    with signals_end_the_program():
        if in_place:
            try:
                with open(target, mode, encoding=encoding) as f:
                    yield f
            except OSError as e:
                fail(f"{path}: cannot write ({e.strerror})")
            return
        tmp = None
        try:
            with signals_held():
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target),
                                           prefix=os.path.basename(target) + ".tmp")
            os.fchmod(fd, 0o666 & ~umask())  # mkstemp's 0600 is not what a new file gets
            with open(fd, mode, encoding=encoding) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            # The path is looked at again: a link may have changed, an input may be there now.
            target, in_place = check_output(path, inputs)
            if in_place:
                fail(f"{path}: no longer a regular file; the new content is not renamed over it")
            os.replace(tmp, target)
            tmp = None
        except OSError as e:
            fail(f"{path}: cannot write ({e.strerror})")
        finally:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)


@contextlib.contextmanager
def atomic_folder(path):
    """A new folder to fill with path's files, renamed to path once the block ends without an
    exception; path (taken by its canonical path, links followed) must not exist or be an empty
    folder other than the current one."""
    if not path:
        fail("'': empty path")
    target = os.path.realpath(path)
    if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
        fail(f"{path}: already exists and is not an empty folder (not overwritten)")
    if target == os.path.realpath(os.getcwd()):
        fail(f"{path}: is the current folder, and replacing it would leave the shell in a removed "
             "folder; give a folder of its own")
    with signals_end_the_program():
        tmp = None
        try:
            with signals_held():
                tmp = tempfile.mkdtemp(dir=os.path.dirname(target), prefix=os.path.basename(target) + ".tmp")
            yield tmp
            os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes it 0700; a folder made by hand is not
            os.replace(tmp, target)  # replaces an empty folder, never a non-empty one
            tmp = None
        except OSError as e:
            fail(f"{path}: cannot write ({e.strerror})")
        finally:
            if tmp is not None:
                shutil.rmtree(tmp)
