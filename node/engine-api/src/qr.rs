//! Renders a QR payload as a `data:image/png;base64,...` URL (what `GET /qr` and `session.qr` carry).
//! Input is a QR payload string (the sim's, or the socket engine's pairing payload); the modules come from
//! `qrcode` and the PNG is encoded here with `png`, since `qrcode` is built without its image feature.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use qrcode::{Color, QrCode};

/// Pixels per QR module.
const SCALE: usize = 4;
/// Quiet zone, in modules, around the code (the QR standard asks for 4).
const QUIET: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum QrRenderError {
    #[error("QR encoding failed: {0}")]
    Encode(#[from] qrcode::types::QrError),
    #[error("PNG encoding failed: {0}")]
    Png(#[from] png::EncodingError),
}

/// Encodes `payload` as a black-on-white grayscale PNG data URL.
pub fn qr_data_url(payload: &str) -> Result<String, QrRenderError> {
    let code = QrCode::new(payload.as_bytes())?;
    let modules = code.width();
    let colors = code.to_colors();
    let side = (modules + 2 * QUIET) * SCALE;
    let mut pixels = vec![255u8; side * side];
    for (index, color) in colors.iter().enumerate() {
        if *color != Color::Dark {
            continue;
        }
        let (mx, my) = (index % modules + QUIET, index / modules + QUIET);
        for y in my * SCALE..(my + 1) * SCALE {
            let row = y * side;
            pixels[row + mx * SCALE..row + (mx + 1) * SCALE].fill(0);
        }
    }
    let side_u32 = u32::try_from(side).unwrap_or(u32::MAX);
    let mut png_bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut png_bytes, side_u32, side_u32);
        encoder.set_color(png::ColorType::Grayscale);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&pixels)?;
        writer.finish()?;
    }
    Ok(format!(
        "data:image/png;base64,{}",
        STANDARD.encode(png_bytes)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_png_data_url_that_differs_per_payload() {
        let a = qr_data_url("sim:one").unwrap();
        let b = qr_data_url("sim:two").unwrap();
        assert!(a.starts_with("data:image/png;base64,iVBORw0KGgo"));
        assert_ne!(a, b);
    }
}
