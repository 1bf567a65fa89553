#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rebuilds src/data/corpus/persuasion.txt, the built-in training corpus.

Source: Debian 12 package r-cran-janeaustenr 1.0.0-1 (MIT-licensed R package
by Julia Silge holding the Project Gutenberg texts of Jane Austen's six
novels). The novels themselves (1811-1817) are in the public domain. We take
"Persuasion" (1817), the fourth object of data/Rdata.rdb.

    apt-get download r-cran-janeaustenr
    dpkg-deb -x r-cran-janeaustenr_1.0.0-1_all.deb x
    python3 tools/corpus/extract-janeaustenr.py \
        x/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb 3 > src/data/corpus/persuasion.txt

An .rdb file is a sequence of entries, each a 4-byte big-endian uncompressed
length and a zlib stream holding one R object in XDR serialization. A
character vector is a run of CHARSXP records (flags word with type 9, then a
big-endian length, then the bytes); the scan below collects those records.
"""
import struct
import sys
import zlib


def objects(data):
    pos = 0
    while pos < len(data):
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data[pos + 4:])
        yield raw
        pos = len(data) - len(inflater.unused_data)


def strings(raw):
    out = []
    pos = 0
    while pos + 8 <= len(raw):
        flags = struct.unpack('>I', raw[pos:pos + 4])[0]
        if flags & 0xff == 9:
            length = struct.unpack('>i', raw[pos + 4:pos + 8])[0]
            if length == -1:
                out.append('')
                pos += 8
                continue
            if 0 <= length < 100000 and pos + 8 + length <= len(raw):
                out.append(raw[pos + 8:pos + 8 + length].decode('utf-8'))
                pos += 8 + length
                continue
        pos += 4 if not out else 1
    return out


def main():
    data = open(sys.argv[1], 'rb').read()
    index = int(sys.argv[2])
    raw = list(objects(data))[index]
    sys.stdout.write('\n'.join(strings(raw)).strip() + '\n')


if __name__ == '__main__':
    main()
