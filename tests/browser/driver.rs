//! The browser harness: one `chromedriver` per test binary, one headless `chromium` session per
//! test ([`Browser`]), ended when the test drops it, passing or failing.
//!
//! Chromium runs with `--headless=new --no-sandbox --disable-gpu`: `--no-sandbox` because CI runs
//! as root, and Chromium's sandbox refuses to start as root. The pages are the app's own, on the
//! loopback. WebDriver's execute-script runs outside the page's Content-Security-Policy (the
//! console allows no script at all), so a test may change the page as an attacker's tool would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::elements::Element;
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::bound::{BACKGROUND_BOUND, bounded};
use crate::helpers::TestApp;

/// The desktop window every session starts with.
pub const WIDE: (u32, u32) = (1280, 800);
/// A phone's viewport (CSS pixels).
pub const PHONE: (u32, u32) = (375, 812);

const INSTALL: &str = "the browser tests need Debian's `chromium` and `chromium-driver` \
    (`apt-get install -y --no-install-recommends chromium chromium-driver`; .ci/run installs \
    them)";

/// The running `chromedriver`: its port, and the pipe whose closing ends it.
struct Driver {
    port: u16,
    chromium: PathBuf,
    /// Never written. When this test binary exits, however it exits, the kernel closes it, and
    /// the shell watching it kills chromedriver's whole process group.
    _lifeline: Mutex<ChildStdin>,
}

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

fn driver() -> &'static Driver {
    match DRIVER.get_or_init(start_driver) {
        Ok(driver) => driver,
        Err(why) => panic!("{why}"),
    }
}

/// `name` on `PATH`.
fn program(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

fn start_driver() -> Result<Driver, String> {
    let chromium =
        program("chromium").ok_or_else(|| format!("no `chromium` on PATH: {INSTALL}"))?;
    let chromedriver =
        program("chromedriver").ok_or_else(|| format!("no `chromedriver` on PATH: {INSTALL}"))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|e| format!("no free port for chromedriver: {e}"))?
        .port();
    // The shell leads a new process group (chromedriver and the browsers it starts join it),
    // starts chromedriver, waits for its stdin to close, then kills the group.
    let mut watcher = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" --port="$1" & read _never; kill -KILL 0"#)
        .arg(&chromedriver)
        .arg(port.to_string())
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}: {INSTALL}", chromedriver.display()))?;
    let lifeline = watcher.stdin.take().expect("piped");
    let stdout = watcher.stdout.take().expect("piped");
    // chromedriver says on stdout when it listens; its later lines are read and dropped, so it
    // never blocks on a full pipe.
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut said = String::new();
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref().map_while(Result::ok) {
            said.push_str(&line);
            said.push('\n');
            if line.contains("started successfully") {
                let _ = ready.send(Ok(()));
                lines.for_each(drop);
                return;
            }
        }
        let _ = ready.send(Err(said));
    });
    match listening.recv_timeout(BACKGROUND_BOUND) {
        Ok(Ok(())) => Ok(Driver {
            port,
            chromium,
            _lifeline: Mutex::new(lifeline),
        }),
        Ok(Err(said)) => Err(format!(
            "{} exited before it listened: {said}",
            chromedriver.display()
        )),
        Err(_) => Err(format!(
            "{} did not listen within {BACKGROUND_BOUND:?}",
            chromedriver.display()
        )),
    }
}

/// Where the test run saves the console's screenshots: `target/console-screenshots/`.
fn screenshot_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("console-screenshots")
}

/// One headless chromium session on the app under test.
pub struct Browser {
    client: Client,
    session: String,
    port: u16,
    /// The app's address, `http://127.0.0.1:<port>`.
    base: String,
}

impl Browser {
    /// A new session at [`WIDE`], with no cookies, pointed at `app`.
    pub async fn open(app: &TestApp) -> Self {
        let driver = driver();
        let arguments = [
            "--headless=new".to_owned(),
            // CI runs as root, where Chromium's sandbox cannot start.
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            format!("--window-size={},{}", WIDE.0, WIDE.1),
            "--hide-scrollbars".to_owned(),
            "--force-device-scale-factor=1".to_owned(),
        ];
        // The performance log carries the browser's network events: [`Browser::posts_sent`].
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": driver.chromium, "args": arguments},
            "goog:loggingPrefs": {"performance": "ALL"},
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let mut builder =
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
        builder.capabilities(capabilities);
        let url = format!("http://127.0.0.1:{}", driver.port);
        let client = bounded("a chromium session", builder.connect(&url))
            .await
            .unwrap_or_else(|e| panic!("chromedriver could not start chromium: {e}: {INSTALL}"));
        let session = client.session_id().await.unwrap().expect("a session id");
        Self {
            client,
            session,
            port: driver.port,
            base: app.address.clone(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens the app's `path` (e.g. `/console`) and waits for it to load.
    pub async fn goto(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        bounded(&url, self.client.goto(&url))
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
    }

    /// The path of the page shown now.
    pub async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// The element `css` selects on the page shown now.
    pub async fn find(&self, css: &str) -> Element {
        match self.client.find(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) => panic!("no `{css}` on: {}: {e}", self.body_text_now().await),
        }
    }

    /// Whether `css` selects anything on the page shown now.
    pub async fn has(&self, css: &str) -> bool {
        !self
            .client
            .find_all(Locator::Css(css))
            .await
            .unwrap()
            .is_empty()
    }

    /// The rendered text of `css` (what a person sees: hidden text is left out).
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    /// The whole page's visible text.
    pub async fn body_text(&self) -> String {
        self.text("body").await
    }

    async fn body_text_now(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(e) => format!("(no page: {e})"),
        }
    }

    /// Types `text` into the field `css` selects.
    pub async fn type_into(&self, css: &str, text: &str) {
        self.find(css).await.send_keys(text).await.unwrap();
    }

    /// Clicks the button `css` and waits for the page its form leads to.
    pub async fn submit(&self, css: &str) {
        let element = self.find(css).await;
        self.mark_page().await;
        element
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
        self.until_new_page().await;
    }

    /// Marks the page shown now, for [`Browser::until_new_page`].
    pub async fn mark_page(&self) {
        self.script("document.documentElement.dataset.left = '1';")
            .await;
    }

    /// Waits until the page marked by [`Browser::mark_page`] has been replaced by the next one.
    pub async fn until_new_page(&self) {
        self.client
            .wait()
            .at_most(BACKGROUND_BOUND)
            .every(Duration::from_millis(20))
            .for_element(Locator::Css("html:not([data-left])"))
            .await
            .unwrap_or_else(|e| panic!("no new page: {e}"));
    }

    /// Runs `script` in the page (outside its Content-Security-Policy) and returns its value.
    pub async fn script(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    /// Every response reaches the page `latency` after its request left (Chrome's network
    /// emulation, through chromedriver's DevTools command); zero turns it off. A test that
    /// acts while a request is on its way holds the page this way, so it never races the
    /// response on a busy machine.
    pub async fn network_latency(&self, latency: Duration) {
        let url = format!(
            "http://127.0.0.1:{}/session/{}/goog/cdp/execute",
            self.port, self.session
        );
        let conditions = json!({
            "offline": false,
            "latency": latency.as_millis() as u64,
            "downloadThroughput": -1,
            "uploadThroughput": -1,
        });
        let answer = bounded(
            "the network emulation",
            reqwest::Client::new()
                .post(&url)
                .json(&json!({"cmd": "Network.emulateNetworkConditions", "params": conditions}))
                .send(),
        )
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(answer.status().is_success(), "{url}: {}", answer.status());
    }

    /// How many `POST`s to `path` the browser sent since the last call (chromedriver's
    /// performance log, read and emptied): every request that left, including one a later
    /// navigation cancelled, which the page itself never learns of.
    pub async fn posts_sent(&self, path: &str) -> usize {
        let url = format!(
            "http://127.0.0.1:{}/session/{}/se/log",
            self.port, self.session
        );
        let log: Value = bounded(
            "the performance log",
            reqwest::Client::new()
                .post(&url)
                .json(&json!({"type": "performance"}))
                .send(),
        )
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .json()
        .await
        .unwrap();
        let target = format!("{}{path}", self.base);
        log["value"]
            .as_array()
            .expect("log entries")
            .iter()
            .filter_map(|entry| serde_json::from_str::<Value>(entry["message"].as_str()?).ok())
            .filter(|event| event["message"]["method"] == "Network.requestWillBeSent")
            .filter(|event| {
                let request = &event["message"]["params"]["request"];
                request["method"] == "POST" && request["url"] == target.as_str()
            })
            .count()
    }

    /// Presses `key` on whatever has the focus, as a person at a keyboard would.
    pub async fn press(&self, key: Key) {
        let value = char::from(key);
        let actions = KeyActions::new("keyboard".to_owned())
            .then(KeyAction::Down { value })
            .then(KeyAction::Up { value });
        bounded("key presses", self.client.perform_actions(actions))
            .await
            .unwrap();
    }

    /// Presses Shift+Tab: the focus goes back one element.
    pub async fn shift_tab(&self) {
        let (shift, tab) = (char::from(Key::Shift), char::from(Key::Tab));
        let actions = KeyActions::new("keyboard".to_owned())
            .then(KeyAction::Down { value: shift })
            .then(KeyAction::Down { value: tab })
            .then(KeyAction::Up { value: tab })
            .then(KeyAction::Up { value: shift });
        bounded("Shift+Tab", self.client.perform_actions(actions))
            .await
            .unwrap();
    }

    /// Types `text` on whatever has the focus, key by key.
    pub async fn type_keys(&self, text: &str) {
        let mut actions = KeyActions::new("typing".to_owned());
        for value in text.chars() {
            actions = actions
                .then(KeyAction::Down { value })
                .then(KeyAction::Up { value });
        }
        self.client.perform_actions(actions).await.unwrap();
    }

    /// The `id` of the focused element, or its tag name when it has none.
    pub async fn focused(&self) -> String {
        self.script(
            "const e = document.activeElement; \
             return e ? (e.id || e.tagName.toLowerCase()) : '';",
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// The value of cookie `name` as the browser holds it (HttpOnly ones included).
    pub async fn cookie(&self, name: &str) -> Option<String> {
        self.client
            .get_all_cookies()
            .await
            .unwrap()
            .into_iter()
            .find(|cookie| cookie.name() == name)
            .map(|cookie| cookie.value().to_owned())
    }

    /// Logs in through the login form with `password`.
    pub async fn log_in(&self, password: &str) {
        self.goto("/console/login").await;
        self.type_into("#password", password).await;
        self.submit(LOGIN_BUTTON).await;
    }

    /// Sets the viewport to `width` × `height` CSS pixels.
    pub async fn viewport(&self, (width, height): (u32, u32)) {
        // The window's size includes what headless chromium counts as its frame: set it, see
        // the viewport it gives, and add the difference.
        self.client.set_window_size(width, height).await.unwrap();
        let inner = self.inner_size().await;
        let outer = (
            width + width.saturating_sub(inner.0),
            height + height.saturating_sub(inner.1),
        );
        if inner != (width, height) {
            self.client.set_window_size(outer.0, outer.1).await.unwrap();
        }
        assert_eq!(
            self.inner_size().await,
            (width, height),
            "the viewport is {width} × {height} px"
        );
    }

    async fn inner_size(&self) -> (u32, u32) {
        let size = self
            .script("return [window.innerWidth, window.innerHeight];")
            .await;
        let side = |i: usize| u32::try_from(size[i].as_u64().unwrap()).unwrap();
        (side(0), side(1))
    }

    /// How wide the page is laid out (`document.documentElement.scrollWidth`): more than the
    /// viewport means a horizontal scroll.
    pub async fn scroll_width(&self) -> u64 {
        self.script("return document.documentElement.scrollWidth;")
            .await
            .as_u64()
            .unwrap()
    }

    /// Saves what the window shows now as `target/console-screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Saves the page shown now at [`WIDE`] and at [`PHONE`] as
    /// `target/console-screenshots/<name>-<width>.png`, checks that at [`PHONE`] it needs no
    /// horizontal scroll, and leaves the window at [`WIDE`].
    pub async fn screenshots(&self, name: &str) {
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for size in [WIDE, PHONE] {
            self.viewport(size).await;
            let png = self.client.screenshot().await.unwrap();
            std::fs::write(dir.join(format!("{name}-{}.png", size.0)), png).unwrap();
            if size == PHONE {
                let width = self.scroll_width().await;
                assert!(
                    width <= u64::from(PHONE.0),
                    "{name} at {} px scrolls sideways: laid out {width} px wide",
                    PHONE.0
                );
            }
        }
        self.viewport(WIDE).await;
    }
}

/// The login form's submit button.
pub const LOGIN_BUTTON: &str = r#"form[action="/console/login"] button[type="submit"]"#;

impl Drop for Browser {
    /// Ends the session (chromedriver then quits its chromium), with a plain blocking request:
    /// the test's runtime may already be gone.
    fn drop(&mut self) {
        let request = format!(
            "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.session, self.port
        );
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            if stream.write_all(request.as_bytes()).is_ok() {
                // chromedriver answers once chromium has quit, and may keep the connection
                // open: the answer ends at its Content-Length, not at the end of the stream.
                let _ = read_response(&mut stream);
            }
        }
    }
}

/// Reads one HTTP response with a `Content-Length` body.
fn read_response(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(received);
        }
        received.extend_from_slice(&chunk[..n]);
        let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if received.len() >= end + 4 + length {
            return Ok(received);
        }
    }
}
