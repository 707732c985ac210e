//! A runnable endpoint serving the demo tenant's two plugin tools, `seats_left` (read) and
//! `create_lead` (write), each call's signature verified with the same crate the agent signs
//! with.
//!
//! ```text
//! export PLUGIN_STUDIO_SECRET=whsec_$(openssl rand -base64 32)
//! cargo run --example plugin_endpoint          # listens on 127.0.0.1:8787
//! cp examples/plugin_endpoint/plugins.json config/plugins.json
//! manychat-agent plugin try seats_left --subscriber 123 --arg class=wheel_basics
//! ```

mod app;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secret = std::env::var("PLUGIN_STUDIO_SECRET")
        .map_err(|_| "set PLUGIN_STUDIO_SECRET to the tools' whsec_ secret")?;
    let port = std::env::var("PORT").unwrap_or_else(|_| "8787".to_owned());
    let (router, _) = app::router(&secret);
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!("plugin endpoint on http://{}", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}
