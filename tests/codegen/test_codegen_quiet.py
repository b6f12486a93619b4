"""LLVM's optimization remarks never reach the user's stderr (codegen/library.py quiet_llvm)."""
from converter_lite.codegen.library import KernelLibrary, resolve_target

# a loop forced to vectorize whose body LLVM cannot widen (an opaque call): LLVM warns "loop not vectorized"
IR = """
declare void @opaque(i64)
define void @f(i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  call void @opaque(i64 %i)
  %j = add i64 %i, 1
  %c = icmp slt i64 %j, %n
  br i1 %c, label %loop, label %exit, !llvm.loop !0
exit:
  ret void
}
!0 = distinct !{!0, !1}
!1 = !{!"llvm.loop.vectorize.enable", i1 true}
"""


def test_llvm_remarks_are_not_printed(capfd, caplog, monkeypatch):
    import logging

    # a CLI test run earlier in this process may have attached the converter's stderr log handler
    # (passes.manager.setup_logging): the remark logged at debug level here must not count as "printed"
    for name in ("converter_lite", "converter_lite.codegen"):
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
    lib = KernelLibrary(resolve_target(None))
    with caplog.at_level("DEBUG", logger="converter_lite.codegen"):
        obj = lib.compile(IR)
    assert obj[:4] == b"\x7fELF"
    out, err = capfd.readouterr()
    assert "not vectorized" not in err and "remark" not in err
