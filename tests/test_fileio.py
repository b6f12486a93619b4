"""fileio.py: the one atomic write (the .ms writer, dumps, kernel cache and reports use it)."""
import os

import pytest

from converter_lite.fileio import atomic_file, write_bytes


def test_an_error_inside_the_block_leaves_the_old_file_and_no_temp(tmp_path):
    p = str(tmp_path / "m.bin")
    write_bytes(p, b"old")
    with pytest.raises(RuntimeError):
        with atomic_file(p) as f:
            f.write(b"half")
            raise RuntimeError("interrupted")
    assert open(p, "rb").read() == b"old" and os.listdir(tmp_path) == ["m.bin"]


def test_a_missing_directory_is_an_error_unless_asked_to_create_it(tmp_path):
    with pytest.raises(OSError):
        with atomic_file(str(tmp_path / "no" / "m.bin")) as f:
            f.write(b"x")
    assert write_bytes(str(tmp_path / "no" / "m.bin"), b"x", make_dirs=True)
    assert open(tmp_path / "no" / "m.bin", "rb").read() == b"x"


def test_the_mode_honours_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_bytes(str(tmp_path / "f"), b"x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "f").st_mode & 0o777 == 0o640
