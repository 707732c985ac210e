//! Spec 020: peak memory of 20 concurrent 16 MB media downloads. Each download streams to its
//! own file in a private directory, so memory should grow by buffers, not by files.
//!
//! `cargo run --example media_download_memory` prints the resident set before, the peak
//! (`VmHWM`) after, and the growth against the bytes downloaded. A local server writes each
//! 16 MiB body from one 64 KiB buffer, so the server itself holds no file either.

use std::time::Instant;

use manychat_agent::media::{self, Detected, MediaHost};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DOWNLOADS: usize = 20;
/// `DOWNLOAD_MIB` (default 16): each file's size, to show growth does not follow it.
fn size() -> usize {
    std::env::var("DOWNLOAD_MIB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(16)
        * 1024
        * 1024
}
const CHUNK: usize = 64 * 1024;

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field is listed")
}

async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let (mut socket, _) = listener.accept().await.expect("accept");
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buffer).await.expect("read");
                if n == 0 {
                    return;
                }
                request.extend_from_slice(&buffer[..n]);
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: audio/ogg\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                size()
            );
            socket.write_all(head.as_bytes()).await.expect("write");
            let chunk = vec![0u8; CHUNK];
            for _ in 0..size() / CHUNK {
                socket.write_all(&chunk).await.expect("write");
            }
        });
    }
}

#[tokio::main]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve(listener));
    let host = MediaHost::parse(&base).unwrap();
    let client = media::download::client();
    let dir = tempfile::tempdir().unwrap();
    let limit = media::download::size_limit(media::MediaKind::Audio);

    let before = status_kib("VmRSS:");
    let started = Instant::now();
    let downloads = (0..DOWNLOADS).map(|i| {
        let url = format!("{base}/{i}/wa/2026/01/01/original_{i:04x}.ogg");
        let Detected::Media(media) = media::detect(&url, &host) else {
            panic!("a media URL");
        };
        let client = client.clone();
        let dir = dir.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        tokio::spawn(async move {
            media::download::fetch(&client, &media, limit, &dir)
                .await
                .expect("downloaded")
                .len
        })
    });
    let mut total = 0u64;
    for download in downloads.collect::<Vec<_>>() {
        total += download.await.unwrap();
    }
    let elapsed = started.elapsed();
    let peak = status_kib("VmHWM:");
    let growth = peak.saturating_sub(before);
    println!(
        "downloads: {DOWNLOADS} × {} MiB = {} MiB in {elapsed:.2?}",
        size() >> 20,
        total >> 20
    );
    println!("resident before: {before} KiB; peak after: {peak} KiB; growth: {growth} KiB");
    println!(
        "growth / bytes downloaded: {:.2} %",
        growth as f64 * 1024.0 * 100.0 / total as f64
    );
}
