//! OpenAI's API as a dialect (issue 40): its requests read or refused, its answers in the shapes its SDKs parse.

pub mod embeddings;
