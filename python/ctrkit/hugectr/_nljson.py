"""HugeCTR's JSON text: nlohmann::json's dump(2) of a model graph.

Objects are written with their keys sorted (nlohmann's std::map), two
spaces of indent, and doubles as nlohmann 3.9 prints them: Grisu2 digits
(round-trip, not always the shortest), then "1.0", "0.001", "1e-07".
ctrkit's Go writer (trainer/graph/write.go) writes the same bytes.
"""

import math
import struct

__all__ = ["dumps", "format_float", "F32"]


class F32(float):
    """A float32 hyper-parameter: printed as the double it widens to."""

    def __new__(cls, v):
        return float.__new__(cls, struct.unpack("<f", struct.pack("<f", float(v)))[0])


_M64 = (1 << 64) - 1


def _cached_power(k):
    """10^k as a normalized 64-bit significand and binary exponent,
    rounded to nearest (Grisu's table)."""
    if k >= 0:
        n = 10 ** k
        e = n.bit_length() - 64
        f = (n + (1 << (e - 1))) >> e if e > 0 else n << -e
    else:
        d = 10 ** -k
        e = -(d.bit_length() + 64)  # f = 10^k · 2^-e ∈ [2^63, 2^64)
        num = 1 << -e
        f, r = divmod(num, d)
        while f >= 1 << 64:
            e += 1
            num = 1 << -e
            f, r = divmod(num, d)
        while f < 1 << 63:
            e -= 1
            num = 1 << -e
            f, r = divmod(num, d)
        if 2 * r >= d:
            f += 1
    if f >= 1 << 64:
        f >>= 1
        e += 1
    return f, e


_POWERS = {}


def _power_for(e):
    alpha, min_dec_exp, step = -60, -300, 8
    f = alpha - e - 1
    k = (f * 78913) // (1 << 18) if f >= 0 else -((-f * 78913) // (1 << 18))
    if f > 0:
        k += 1
    idx = (-min_dec_exp + k + (step - 1)) // step
    dk = min_dec_exp + idx * step
    if dk not in _POWERS:
        _POWERS[dk] = _cached_power(dk)
    f, e = _POWERS[dk]
    return f, e, dk


def _mul(xf, xe, yf, ye):
    ulo, uhi = xf & 0xFFFFFFFF, xf >> 32
    vlo, vhi = yf & 0xFFFFFFFF, yf >> 32
    p0, p1, p2, p3 = ulo * vlo, ulo * vhi, uhi * vlo, uhi * vhi
    q = (p0 >> 32) + (p1 & 0xFFFFFFFF) + (p2 & 0xFFFFFFFF)
    q += 1 << 31
    h = p3 + (p2 >> 32) + (p1 >> 32) + (q >> 32)
    return h & _M64, xe + ye + 64


def _normalize(f, e):
    s = 64 - f.bit_length()
    return (f << s) & _M64, e - s


def _boundaries(value):
    bias, hidden = 1075, 1 << 52
    b = struct.unpack("<Q", struct.pack("<d", value))[0]
    E, F = (b >> 52) & 0x7FF, b & (hidden - 1)
    vf, ve = (F + hidden, E - bias) if E != 0 else (F, 1 - bias)
    closer = F == 0 and E > 1
    pf, pe = 2 * vf + 1, ve - 1
    mf, me = (4 * vf - 1, ve - 2) if closer else (2 * vf - 1, ve - 1)
    pf, pe = _normalize(pf, pe)
    mf, me = (mf << (me - pe)) & _M64, pe
    wf, we = _normalize(vf, ve)
    return (wf, we), (mf, me), (pf, pe)


def _round(buf, dist, delta, rest, ten_k):
    while rest < dist and delta - rest >= ten_k and (rest + ten_k < dist or dist - rest > rest + ten_k - dist):
        buf[-1] -= 1
        rest += ten_k


def _grisu2(value):
    (vf, ve), (mf, me), (pf, pe) = _boundaries(value)
    cf, ce, ck = _power_for(pe)
    wf, we = _mul(vf, ve, cf, ce)
    lf, le = _mul(mf, me, cf, ce)
    hf, he = _mul(pf, pe, cf, ce)
    lo = lf + 1
    hi = hf - 1
    exp = -ck
    delta = hi - lo
    dist = hi - wf
    shift = -he
    one = 1 << shift
    p1 = hi >> shift
    p2 = hi & (one - 1)
    n = len(str(p1))
    pow10 = 10 ** (n - 1)
    buf = []
    while n > 0:
        d, p1 = divmod(p1, pow10)
        buf.append(d)
        n -= 1
        rest = (p1 << shift) + p2
        if rest <= delta:
            exp += n
            _round(buf, dist, delta, rest, pow10 << shift)
            return "".join(map(str, buf)), exp
        pow10 //= 10
    m = 0
    while True:
        p2 = (p2 * 10) & _M64
        delta = (delta * 10) & _M64
        dist = (dist * 10) & _M64
        d, p2 = p2 >> shift, p2 & (one - 1)
        buf.append(d)
        m += 1
        if p2 <= delta:
            break
    exp -= m
    _round(buf, dist, delta, p2, one)
    return "".join(map(str, buf)), exp


def format_float(x):
    """x as nlohmann::json 3.9 dumps a double (NaN and infinities: null)."""
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return "null"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign = ""
    if x < 0:
        sign, x = "-", -x
    digits, e10 = _grisu2(x)
    k = len(digits)
    n = k + e10
    if k <= n <= 15:
        return sign + digits + "0" * (n - k) + ".0"
    if 0 < n <= 15:
        return sign + digits[:n] + "." + digits[n:]
    if -4 < n <= 0:
        return sign + "0." + "0" * -n + digits
    m = digits[:1]
    if k > 1:
        m += "." + digits[1:]
    e = n - 1
    es = "+"
    if e < 0:
        es, e = "-", -e
    return "%s%se%s%02d" % (sign, m, es, e)


def _string(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif c < 0x20:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _encode(out, v, depth):
    if isinstance(v, dict):
        if not v:
            out.append("{}")
            return
        out.append("{\n")
        keys = sorted(v, key=lambda k: k.encode("utf-8"))
        for i, k in enumerate(keys):
            out.append("  " * (depth + 1))
            out.append(_string(k))
            out.append(": ")
            _encode(out, v[k], depth + 1)
            if i < len(keys) - 1:
                out.append(",")
            out.append("\n")
        out.append("  " * depth + "}")
    elif isinstance(v, (list, tuple)):
        if not v:
            out.append("[]")
            return
        out.append("[\n")
        for i, e in enumerate(v):
            out.append("  " * (depth + 1))
            _encode(out, e, depth + 1)
            if i < len(v) - 1:
                out.append(",")
            out.append("\n")
        out.append("  " * depth + "]")
    elif isinstance(v, str):
        out.append(_string(v))
    elif isinstance(v, bool):
        out.append("true" if v else "false")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(format_float(v))
    elif v is None:
        out.append("null")
    else:
        raise TypeError("cannot write %r as JSON" % (v,))


def dumps(v):
    """v as nlohmann::json's dump(2) text (no trailing newline)."""
    out = []
    _encode(out, v, 0)
    return "".join(out)
