"""gnn.registry.Registry: registration order, refusal of a taken name, lookup errors naming the known entries."""

import pytest

from gnn.registry import Registry


def test_registry_keeps_order_refuses_a_taken_name_and_names_the_known_ones():
    reg: Registry[int] = Registry("widget")
    a, b = object(), object()
    reg.register("b", b)
    reg.register("a", a)
    assert list(reg) == ["b", "a"] and reg["a"] is a and len(reg) == 2 and "a" in reg
    assert reg.register("a", a) is a  # the same entry again is a no-op
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a", object())
    with pytest.raises(ValueError, match=r"unknown widget 'c'; known: b, a"):
        reg.lookup("c")
    reg.unregister("b")
    reg.unregister("b")  # absent: nothing to do
    assert list(reg) == ["a"] and reg.get("b") is None
