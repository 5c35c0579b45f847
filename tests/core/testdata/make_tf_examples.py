#!/usr/bin/env python3
"""Writes examples.tfrecord: two tf.train.Example records framed as TFRecord.

An implementation independent of twinps' C++ (Python standard library only,
written from the format's description: protobuf wire format, TensorFlow's
feature.proto field numbers, CRC-32C masked as rotate_right(crc, 15) +
0xa282ead8), so tests/core/tfrecord_test.cc checks our reader against bytes
it did not produce. The first record packs its lists (as TensorFlow writes),
the second writes them unpacked and orders its features differently (both
valid protobuf encodings a reader must accept).

Run from this directory: python3 make_tf_examples.py
"""
import struct


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(v):
    v &= (1 << 64) - 1  # int64 is two's complement in a varint
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(number, wire_type, payload=b""):
    key = varint(number << 3 | wire_type)
    if wire_type == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def bytes_list(values):
    return field(1, 2, b"".join(field(1, 2, v) for v in values))


def float_list(values, packed=True):
    if packed:
        return field(2, 2, field(1, 2, b"".join(struct.pack("<f", v) for v in values)))
    return field(2, 2, b"".join(field(1, 5, struct.pack("<f", v)) for v in values))


def int64_list(values, packed=True):
    if packed:
        return field(3, 2, field(1, 2, b"".join(varint(v) for v in values)))
    return field(3, 2, b"".join(field(1, 0, varint(v)) for v in values))


def example(features):
    entries = b"".join(field(1, 2, field(1, 2, name.encode()) + field(2, 2, feature)) for name, feature in features)
    return field(1, 2, entries)


def frame(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(crc32c(length))) + data + struct.pack("<I", masked(crc32c(data)))


records = [
    example([
        ("label", int64_list([1])),
        ("price", float_list([2.5])),
        ("ids", int64_list([3, -7, 1 << 40])),
        ("name", bytes_list([b"red shoe"])),
        ("ignored", float_list([9.0, 9.0])),
    ]),
    example([
        ("name", bytes_list([b"", b"blue"])),
        ("ids", int64_list([], packed=False)),
        ("price", float_list([-0.125], packed=False)),
        ("label", int64_list([0], packed=False)),
    ]),
]

with open("examples.tfrecord", "wb") as out:
    for r in records:
        out.write(frame(r))
