'use strict';
// Minimal NumPy .npy reader/writer (format versions 1.0, 2.0 and 3.0; little-endian,
// C order). Tensors are { dtype, shape, data } where dtype is an onnxruntime type name
// ('float32', 'int64', 'bool', ...) and data is the matching typed array.

const fs = require('fs');

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

// onnxruntime type name -> [npy descr, TypedArray constructor]
const DTYPES = {
  float32: ['<f4', Float32Array],
  float64: ['<f8', Float64Array],
  float16: ['<f2', Uint16Array], // raw IEEE half bits
  int8: ['|i1', Int8Array],
  int16: ['<i2', Int16Array],
  int32: ['<i4', Int32Array],
  int64: ['<i8', BigInt64Array],
  uint8: ['|u1', Uint8Array],
  uint16: ['<u2', Uint16Array],
  uint32: ['<u4', Uint32Array],
  uint64: ['<u8', BigUint64Array],
  bool: ['|b1', Uint8Array],
};

// npy descr (with any byte-order mark) -> onnxruntime type name
const DESCR_TO_DTYPE = {};
for (const [name, [descr]] of Object.entries(DTYPES)) {
  const kind = descr.slice(1);
  for (const order of ['<', '|', '=']) DESCR_TO_DTYPE[order + kind] = name;
}

function parseHeader(text, file) {
  // The header is a Python dict literal, e.g.
  // {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(text);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(text);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr || !fortran || !shape) {
    throw new Error(`${file}: malformed .npy header: ${text.trim()}`);
  }
  const dims = shape[1]
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      const n = Number(s.replace(/L$/, ''));
      if (!Number.isInteger(n) || n < 0) throw new Error(`${file}: bad dimension '${s}' in .npy header`);
      return n;
    });
  return { descr: descr[1], fortranOrder: fortran[1] === 'True', shape: dims };
}

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) {
    throw new Error(`${file}: not a .npy file (bad magic)`);
  }
  const major = buf[6];
  let headerLen;
  let headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    throw new Error(`${file}: unsupported .npy format version ${major}.${buf[7]}`);
  }
  const header = parseHeader(buf.toString(major === 3 ? 'utf8' : 'latin1', headerStart, headerStart + headerLen), file);
  const dtype = DESCR_TO_DTYPE[header.descr];
  if (!dtype) {
    const hint = header.descr.startsWith('>') ? ' (big-endian data is not supported)' : '';
    throw new Error(`${file}: unsupported .npy dtype '${header.descr}'${hint}; supported: ` +
      Object.values(DTYPES).map((d) => d[0]).join(' '));
  }
  if (header.fortranOrder && header.shape.length > 1) {
    throw new Error(`${file}: Fortran-ordered arrays are not supported; save np.ascontiguousarray(a)`);
  }
  const Ctor = DTYPES[dtype][1];
  const count = header.shape.reduce((a, b) => a * b, 1);
  const dataStart = headerStart + headerLen;
  const byteLen = count * Ctor.BYTES_PER_ELEMENT;
  if (buf.length - dataStart < byteLen) {
    throw new Error(`${file}: truncated .npy file: expected ${byteLen} data bytes, found ${buf.length - dataStart}`);
  }
  // Copy into a fresh, aligned buffer (the file buffer's data offset may be unaligned).
  const data = new Ctor(count);
  Buffer.from(data.buffer).set(buf.subarray(dataStart, dataStart + byteLen));
  return { dtype, shape: header.shape, data };
}

function writeNpy(file, dtype, shape, data) {
  const entry = DTYPES[dtype];
  if (!entry) throw new Error(`cannot write dtype '${dtype}' to .npy (${file})`);
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${entry[0]}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  // Pad so that magic(6) + version(2) + len(2) + header + '\n' is a multiple of 64.
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  MAGIC.copy(pre, 0);
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  let bytes;
  if (ArrayBuffer.isView(data)) {
    bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  } else if (Array.isArray(data) && dtype === 'bool') {
    bytes = Buffer.from(data.map((v) => (v ? 1 : 0)));
  } else {
    throw new Error(`cannot write data of type ${typeof data} as ${dtype} (${file})`);
  }
  const count = shape.reduce((a, b) => a * b, 1);
  if (bytes.length !== count * entry[1].BYTES_PER_ELEMENT) {
    throw new Error(`${file}: ${bytes.length} data bytes do not match ${dtype} shape [${shape}]`);
  }
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), bytes]));
}

module.exports = { readNpy, writeNpy, DTYPES };
